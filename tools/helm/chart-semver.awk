# chart-semver.awk maps the image's version (the Makefile's VERSION, from
# `git describe --tags --always --dirty`) to the SemVer Helm requires of a
# chart's version; mk/helm.mk documents the mapping. It prints nothing and
# exits 1 for a version it cannot map, which make reports.
#
#   printf '%s\n' v1.2.3-4-gabc1234 | awk -f tools/helm/chart-semver.awk   # 1.2.4-0.4.gabc1234
#
# Numbers are handled as strings of digits, never as awk numbers: mawk's
# numbers are doubles, and above 2^31-1 it prints them as 2.14748e+09.
{
	v = $0
	dirty = sub(/-dirty$/, "", v)
	ahead = ""
	if (match(v, /-[0-9]+-g[0-9a-f]+$/)) {
		split(substr(v, RSTART + 1), part, "-")
		ahead = part[1] "." part[2]
		v = substr(v, 1, RSTART - 1)
	}
	if (v ~ /^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$/) {
		sub(/^v/, "", v)
		core = v; pre = ""
		if (i = index(v, "-")) { core = substr(v, 1, i - 1); pre = substr(v, i + 1) }
		split(core, n, ".")
		if (!canonical(n[1]) || !canonical(n[2]) || !canonical(n[3]) || !prerelease(pre)) { exit 1 }
		# A dirty tree on the tag itself is after the tag and before its
		# first commit: zero commits ahead, dirty. Otherwise "1.2.3-dirty"
		# would be a pre-release of 1.2.3, sorting below the tag.
		if (ahead == "" && dirty) { ahead = "0" }
		if (ahead != "") {
			if (pre == "") { core = n[1] "." n[2] "." incr(n[3] ""); pre = "0." ahead }
			else { pre = pre ".0." ahead }
		}
	} else if (ahead == "" && v ~ /^[0-9a-f]+$/) {
		core = "0.0.0"; pre = "0.g" v
	} else if (ahead == "" && v == "dev") {
		core = "0.0.0"; pre = "dev"
	} else {
		exit 1
	}
	if (dirty) { pre = (pre == "" ? "dirty" : pre ".dirty") }
	out = core (pre == "" ? "" : "-" pre)
	if (!semver(out)) { exit 1 }
	print out
}

# canonical: a SemVer number has no leading zero.
function canonical(s) { return s ~ /^(0|[1-9][0-9]*)$/ }

# prerelease: no numeric identifier of a SemVer pre-release has a leading zero.
function prerelease(s,    id, k, i) {
	if (s == "") return 1
	k = split(s, id, ".")
	for (i = 1; i <= k; i++) if (id[i] ~ /^0[0-9]+$/) return 0
	return 1
}

# incr is the string of digits s plus one, digit by digit.
function incr(s,    i, d, out, carry) {
	out = ""; carry = 1
	for (i = length(s); i >= 1; i--) {
		d = substr(s, i, 1) + carry
		carry = (d == 10)
		out = (carry ? "0" : d "") out
	}
	return (carry ? "1" : "") out
}

# uint64: Helm reads MAJOR, MINOR and PATCH as unsigned 64-bit integers
# and refuses a chart whose number does not fit.
function uint64(s) { s = s ""; return length(s) < 20 || (length(s) == 20 && s <= "18446744073709551615") }

# semver: v is SemVer 2.0.0 (semver.org's expression, without build
# metadata, which the mapping never adds) and Helm can read its numbers.
# The last check of every result, so that no mapping, however it is
# changed, prints what Helm would refuse.
function semver(v,    num, id, c, n) {
	num = "(0|[1-9][0-9]*)"
	id = "(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
	if (v !~ ("^" num "\\." num "\\." num "(-" id "(\\." id ")*)?$")) return 0
	c = v; sub(/-.*/, "", c)
	split(c, n, ".")
	return uint64(n[1]) && uint64(n[2]) && uint64(n[3])
}
