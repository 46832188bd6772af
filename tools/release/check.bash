# check.bash is what `make release` checks before it builds anything
# (mk/release.mk): that VERSION was given, that it is SemVer with a leading
# v, as the tag, the image's tag and the chart's appVersion all take it,
# that GNU tar and zip are at hand, and that the tree holds no uncommitted
# change, unless the release is a snapshot. A refused VERSION exits 2 with
# a line naming it, what is wrong and an example; so does a dirty tree,
# naming the fix.
#
#   VERSION=v1.2.3 VERSION_ORIGIN='command line' bash tools/release/check.bash
#
# VERSION comes from the environment, where make puts a VERSION given on its
# command line: no quoting in a recipe can break on what it holds.
# VERSION_ORIGIN is make's $(origin VERSION); RELEASE_SNAPSHOT=1, which only
# `make release-snapshot` sets, lets a dirty tree through.
set -u

v=${VERSION-}
example='say VERSION=vMAJOR.MINOR.PATCH or vMAJOR.MINOR.PATCH-PRE, e.g. make release VERSION=v1.2.3 or VERSION=v1.2.3-rc.1'

refuse() {
	printf 'VERSION=%s %s: %s\n' "$v" "$1" "$example" >&2
	exit 2
}

case ${VERSION_ORIGIN-} in
'command line' | environment) ;;
*)
	printf 'VERSION is not given: a release is made of a version named on purpose, not of what git describe says: %s\n' "$example" >&2
	exit 2
	;;
esac

[[ -n $v ]] || refuse "is empty"
[[ $v == v* ]] || refuse "has no leading v"
[[ $v != *+* ]] || refuse "carries build metadata (+...), which an image tag cannot hold"
rest=${v#v}
core=${rest%%-*}
[[ $core =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || refuse "does not begin with three numbers, vMAJOR.MINOR.PATCH"
IFS=. read -r -a numbers <<<"$core"
for n in "${numbers[@]}"; do
	[[ $n == 0 || $n != 0* ]] || refuse "has a number with a leading zero, which SemVer forbids"
	# Helm reads a chart's version numbers as unsigned 64-bit integers.
	# Digit strings of one length compare as text as they do as numbers,
	# and these may be past what bash's arithmetic holds.
	# shellcheck disable=SC2071
	if ((${#n} > 20)) || { ((${#n} == 20)) && [[ $n > 18446744073709551615 ]]; }; then
		refuse "has a number above 18446744073709551615, which Helm cannot read"
	fi
done
if [[ $rest == *-* ]]; then
	pre=${rest#*-}
	[[ -n $pre ]] || refuse "has nothing after the - that begins its pre-release"
	[[ $pre =~ ^[0-9A-Za-z.-]+$ ]] || refuse "has a pre-release holding something other than 0-9, A-Z, a-z, - and ."
	[[ $pre != .* && $pre != *. && $pre != *..* ]] || refuse "has an empty pre-release identifier (two dots, or a dot at an end)"
	IFS=. read -r -a ids <<<"$pre"
	for id in "${ids[@]}"; do
		[[ ! $id =~ ^0[0-9]+$ ]] || refuse "has a numeric pre-release identifier with a leading zero ($id), which SemVer forbids"
	done
fi

# The archives are made with GNU tar's --sort and --mtime; another tar would
# fail half-way through, after the builds. make package falls back to
# Python's zipfile without zip, whose compressed bytes differ: a release's
# zip would then differ from CI's.
tar --version 2>/dev/null | grep -q 'GNU tar' || {
	echo "make release needs GNU tar (for --sort=name and --mtime): install it, and put it first on PATH as tar" >&2
	exit 1
}
command -v zip >/dev/null 2>&1 || {
	echo "make release needs Info-ZIP's zip, for a Lambda package the same as every other build's: install zip" >&2
	exit 1
}

[[ ${RELEASE_SNAPSHOT-} == 1 ]] && exit 0
# As git describe --dirty, which the Makefile's VERSION comes from, judges
# it: changes to tracked files, not untracked ones.
if ! status=$(git status --porcelain --untracked-files=no 2>&1); then
	printf 'cannot tell whether the tree is committed, and a release must be of a commit: git status: %s\n' "$status" >&2
	exit 2
fi
if [[ -n $status ]]; then
	printf 'refusing to release VERSION=%s from a tree with uncommitted changes, which no commit could rebuild: commit them first, or try it with make release-snapshot\n%s\n' "$v" "$status" >&2
	exit 2
fi
