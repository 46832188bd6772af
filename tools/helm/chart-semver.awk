# chart-semver.awk maps the image's version (the Makefile's VERSION, from
# `git describe --tags --always --dirty`) to the SemVer Helm requires of a
# chart's version; mk/helm.mk documents the mapping. It prints nothing for
# a version it cannot map, which make reports.
#
#   printf '%s\n' v1.2.3-4-gabc1234 | awk -f tools/helm/chart-semver.awk   # 1.2.4-0.4.gabc1234
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
		if (!canonical(n[1]) || !canonical(n[2]) || !canonical(n[3]) || !prerelease(pre)) { exit 0 }
		if (ahead != "") {
			if (pre == "") { core = n[1] "." n[2] "." (n[3] + 1); pre = "0." ahead }
			else { pre = pre ".0." ahead }
		}
	} else if (ahead == "" && v ~ /^[0-9a-f]+$/) {
		core = "0.0.0"; pre = "0.g" v
	} else if (ahead == "" && v == "dev") {
		core = "0.0.0"; pre = "dev"
	} else {
		exit 0
	}
	if (dirty) { pre = (pre == "" ? "dirty" : pre ".dirty") }
	print core (pre == "" ? "" : "-" pre)
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
