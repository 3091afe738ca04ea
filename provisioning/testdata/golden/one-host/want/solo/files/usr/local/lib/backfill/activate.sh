#!/bin/bash
# Brings solo (dispatcher, supervisor, mongodb) of backfill cluster solo up once its files are in place:
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
install -d -o backfill -g adm -m 0750 /var/log/backfill

# MongoDB from MongoDB's own repository (Debian ships none).
if ! command -v mongod >/dev/null 2>&1; then
	# shellcheck source=/dev/null
	. /etc/os-release
	case "$ID" in
	debian) repo="https://repo.mongodb.org/apt/debian $VERSION_CODENAME/mongodb-org/8.0 main" ;;
	ubuntu) repo="https://repo.mongodb.org/apt/ubuntu $VERSION_CODENAME/mongodb-org/8.0 multiverse" ;;
	*) log "MongoDB: $ID is neither Debian nor Ubuntu"; exit 1 ;;
	esac
	curl -fsSL --retry 5 https://pgp.mongodb.com/server-8.0.asc |
		gpg --batch --yes --dearmor -o /usr/share/keyrings/mongodb-server-8.0.gpg
	echo "deb [signed-by=/usr/share/keyrings/mongodb-server-8.0.gpg] $repo" >/etc/apt/sources.list.d/mongodb-org-8.0.list
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Options::=--force-confold mongodb-org >/dev/null
fi
systemctl daemon-reload
systemctl enable mongod.service
if [ "$restart" = --restart ] || ! systemctl is-active --quiet mongod.service; then
	systemctl restart mongod.service
fi
mongo() {
	mongosh --quiet --host 127.0.0.1 --port 27017 "$@"
}
for _ in $(seq 60); do
	if mongo --eval 'db.runCommand({ping: 1}).ok' >/dev/null 2>&1; then
		break
	fi
	sleep 1
done
# The user is made once, through MongoDB's localhost exception; after that
# authenticating as it proves it is there with this password.
BACKFILL_MONGODB_PASSWORD=$(cat /etc/backfill/mongodb/password)
export BACKFILL_MONGODB_PASSWORD
if ! mongo --eval 'db.getSiblingDB("admin").auth("backfill", process.env.BACKFILL_MONGODB_PASSWORD).ok' >/dev/null 2>&1; then
	log "MongoDB: creating user backfill"
	mongo --eval 'db.getSiblingDB("admin").createUser({user: "backfill", pwd: process.env.BACKFILL_MONGODB_PASSWORD, roles: [{role: "readWrite", db: "backfill"}]})'
fi
unset BACKFILL_MONGODB_PASSWORD

# The backfill binary, checked against its SHA-256.
want=4f146b7295e7c9e1383db35713f86850b2f17b0b32765290770a359b65478f4f
have=""
if [ -f /usr/local/bin/backfill ]; then
	have=$(sha256sum /usr/local/bin/backfill | cut -d' ' -f1)
fi
if [ "$have" != "$want" ]; then
	tmp=$(mktemp /usr/local/bin/backfill.XXXXXX)
	if [ ! -f /root/backfill ]; then
		rm -f "$tmp"
		log "copy the binary here first: scp backfill root@HOST:/root/backfill, then run install.sh"
		exit 1
	fi
	cp /root/backfill "$tmp"
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
systemctl enable backfill-dispatcher.service backfill-supervisor.service
if [ "$restart" = --restart ]; then
	systemctl restart backfill-dispatcher.service backfill-supervisor.service
else
	systemctl start backfill-dispatcher.service backfill-supervisor.service
fi
log "done"
