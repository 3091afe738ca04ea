#!/bin/bash
# Brings db (mongodb) of backfill cluster big-crawl up once its files are in place:
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
chown mongodb:mongodb /etc/backfill/mongodb/server.pem
systemctl daemon-reload
systemctl enable mongod.service
if [ "$restart" = --restart ] || ! systemctl is-active --quiet mongod.service; then
	systemctl restart mongod.service
fi
mongo() {
	mongosh --quiet --host 127.0.0.1 --port 27017 --tls --tlsCAFile /etc/backfill/mongodb/ca.pem --tlsCertificateKeyFile /etc/backfill/mongodb/client.pem "$@"
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
if ! mongo --eval 'db.getSiblingDB("admin").auth("crawler", process.env.BACKFILL_MONGODB_PASSWORD).ok' >/dev/null 2>&1; then
	log "MongoDB: creating user crawler"
	mongo --eval 'db.getSiblingDB("admin").createUser({user: "crawler", pwd: process.env.BACKFILL_MONGODB_PASSWORD, roles: [{role: "readWrite", db: "crawl"}]})'
fi
unset BACKFILL_MONGODB_PASSWORD
log "done"
