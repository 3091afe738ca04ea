#!/bin/bash
# Installs {{.Host}} ({{.Roles}}) of backfill cluster {{.Cluster}} on a Debian or Ubuntu
# machine that exists already; does what the host's user-data does on first boot,
# and is safe to run again (an upgrade, a changed inventory). As root:
#   ssh root@{{.Address}} 'bash -s' < install.sh
# Rendered by `backfill provision render`: change the inventory, not this file.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

apt-get update -qq
apt-get install -y -qq -o Dpkg::Options::=--force-confold{{range .Packages}} {{.}}{{end}} >/dev/null

if ! id {{.User}} >/dev/null 2>&1; then
	useradd --system --user-group --home-dir {{.StateDir}} --no-create-home --shell /usr/sbin/nologin {{.User}}
fi
{{- if .SwapMiB}}

# A swap file: this droplet has less than {{.SwapBelowMiB}} MiB of memory.
if [ ! -f {{.SwapFile}} ]; then
	fallocate -l {{.SwapMiB}}M {{.SwapFile}}
	chmod 0600 {{.SwapFile}}
	mkswap {{.SwapFile}} >/dev/null
fi
if ! swapon --show=NAME --noheadings | grep -qx {{.SwapFile}}; then
	swapon {{.SwapFile}}
fi
if ! grep -q '^{{.SwapFile}} ' /etc/fstab; then
	echo '{{.SwapFile}} none swap sw 0 0' >>/etc/fstab
fi
{{- end}}

# put PATH MODE OWNER writes standard input (base64) to PATH, and notes a change.
changed=""
put() {
	local path=$1 mode=$2 owner=$3 tmp
	mkdir -p "$(dirname "$path")"
	tmp=$(mktemp "$path.XXXXXX")
	base64 -d >"$tmp"
	chmod "$mode" "$tmp"
	chown "$owner" "$tmp"
	if cmp -s "$tmp" "$path"; then
		rm -f "$tmp"
	else
		mv -f "$tmp" "$path"
		changed=1
	fi
}
{{range .Files}}
put {{.Path}} {{.ModeString}} {{.Owner}} <<'EOF'
{{.Base64}}
EOF
{{- end}}

if [ -n "$changed" ]; then
	{{.ActivatePath}} --restart
else
	{{.ActivatePath}}
fi
