#!/bin/bash
# Brings dispatcher (dispatcher) of backfill cluster crawl up once its files are in place:
# run by cloud-init on first boot and by install.sh on every run; safe to run again.
# Rendered by `backfill provision render`: change the inventory, not this file.
#
# activate.sh [--restart]   --restart restarts backfill's services (new files or binary)
set -euo pipefail
restart=${1:-}

log() { printf 'backfill activate: %s\n' "$*" >&2; }

# Firewall first: default deny, then only what the cluster needs. ufw
# would keep rules of its own beside ours, so it is turned off.
if command -v ufw >/dev/null 2>&1 && ufw status | grep -q '^Status: active'; then
	log "turning ufw off: nftables holds this host's whole ruleset"
	ufw --force disable
fi
nft -f /etc/nftables.conf
systemctl enable nftables.service

# SSH with keys only: a running sshd reloads; one started on demand (a
# socket-activated ssh) reads the new settings when it starts.
sshd -t
systemctl try-reload-or-restart ssh.service

# fail2ban after the firewall, whose loading flushed fail2ban's table.
systemctl enable fail2ban.service
systemctl restart fail2ban.service

# The journal on disk, rotated.
systemctl restart systemd-journald.service

install -d -o backfill -g backfill -m 0750 /var/lib/backfill

# The backfill binary, checked against its SHA-256.
want=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
have=""
if [ -f /usr/local/bin/backfill ]; then
	have=$(sha256sum /usr/local/bin/backfill | cut -d' ' -f1)
fi
if [ "$have" != "$want" ]; then
	tmp=$(mktemp /usr/local/bin/backfill.XXXXXX)
	curl -fsSL --retry 5 -o "$tmp" 'https://example.org/releases/backfill-linux-amd64'
	if ! echo "$want  $tmp" | sha256sum --check --status; then
		rm -f "$tmp"
		log "the binary's SHA-256 is not $want: not installed"
		exit 1
	fi
	chmod 0755 "$tmp"
	mv -f "$tmp" /usr/local/bin/backfill
	restart=--restart
fi

systemctl daemon-reload
systemctl enable backfill-dispatcher.service
if [ "$restart" = --restart ]; then
	systemctl restart backfill-dispatcher.service
else
	systemctl start backfill-dispatcher.service
fi
log "done"
