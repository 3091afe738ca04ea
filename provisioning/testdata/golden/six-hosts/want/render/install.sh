#!/bin/bash
# Installs render (render) of backfill cluster big-crawl on a Debian or Ubuntu
# machine that exists already; does what the host's user-data does on first boot,
# and is safe to run again (an upgrade, a changed inventory). As root:
#   ssh root@203.0.113.15 'bash -s' < install.sh
# Rendered by `backfill provision render`: change the inventory, not this file.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

apt-get update -qq
apt-get install -y -qq -o Dpkg::Options::=--force-confold ca-certificates chromium-headless-shell curl fail2ban fonts-liberation libzmq5 nftables python3-systemd unattended-upgrades >/dev/null

if ! id backfill >/dev/null 2>&1; then
	useradd --system --user-group --home-dir /var/lib/backfill --no-create-home --shell /usr/sbin/nologin backfill
fi

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

put /etc/apt/apt.conf.d/20auto-upgrades 0644 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/backfill/curve/dispatcher.pub 0644 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/backfill/curve/render.key 0600 backfill:backfill <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/backfill/curve/render.pub 0644 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/backfill/encryption 0644 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/backfill/mongodb/ca.pem 0644 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/backfill/mongodb/client.pem 0600 backfill:backfill <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/backfill/store.uri 0600 backfill:backfill <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/fail2ban/jail.d/backfill.local 0644 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/nftables.conf 0755 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/ssh/sshd_config.d/10-backfill.conf 0644 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/systemd/journald.conf.d/backfill.conf 0644 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /etc/systemd/system/backfill-supervisor.service 0644 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /root/.ssh/authorized_keys 0600 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF
put /usr/local/lib/backfill/activate.sh 0755 root:root <<'EOF'
(a file under files/, base64-encoded)
EOF

if [ -n "$changed" ]; then
	/usr/local/lib/backfill/activate.sh --restart
else
	/usr/local/lib/backfill/activate.sh
fi
