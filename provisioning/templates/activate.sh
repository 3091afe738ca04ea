#!/bin/bash
# Brings {{.Host}} ({{.Roles}}) of backfill cluster {{.Cluster}} up once its files are in place:
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

install -d -o {{.User}} -g {{.User}} -m 0750 {{.StateDir}}
{{- if .LogDir}}
install -d -o {{.User}} -g adm -m 0750 {{.LogDir}}
{{- end}}
{{- if .MongoDB}}

# MongoDB from MongoDB's own repository (Debian ships none).
if ! command -v mongod >/dev/null 2>&1; then
	# shellcheck source=/dev/null
	. /etc/os-release
	case "$ID" in
	debian) repo="https://repo.mongodb.org/apt/debian $VERSION_CODENAME/mongodb-org/{{.MongoDB.Version}} main" ;;
	ubuntu) repo="https://repo.mongodb.org/apt/ubuntu $VERSION_CODENAME/mongodb-org/{{.MongoDB.Version}} multiverse" ;;
	*) log "MongoDB: $ID is neither Debian nor Ubuntu"; exit 1 ;;
	esac
	curl -fsSL --retry 5 https://pgp.mongodb.com/server-{{.MongoDB.Version}}.asc |
		gpg --batch --yes --dearmor -o /usr/share/keyrings/mongodb-server-{{.MongoDB.Version}}.gpg
	echo "deb [signed-by=/usr/share/keyrings/mongodb-server-{{.MongoDB.Version}}.gpg] $repo" >/etc/apt/sources.list.d/mongodb-org-{{.MongoDB.Version}}.list
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Options::=--force-confold mongodb-org >/dev/null
fi
{{- if .MongoDB.TLS}}
chown mongodb:mongodb {{.MongoDB.ServerPEM}}
{{- end}}
systemctl daemon-reload
systemctl enable mongod.service
if [ "$restart" = --restart ] || ! systemctl is-active --quiet mongod.service; then
	systemctl restart mongod.service
fi
mongo() {
	mongosh --quiet --host 127.0.0.1 --port {{.MongoDB.Port}}{{if .MongoDB.TLS}} --tls --tlsCAFile {{.MongoDB.CAFile}} --tlsCertificateKeyFile {{.MongoDB.ClientPEM}}{{end}} "$@"
}
for _ in $(seq 60); do
	if mongo --eval 'db.runCommand({ping: 1}).ok' >/dev/null 2>&1; then
		break
	fi
	sleep 1
done
# The user is made once, through MongoDB's localhost exception; after that
# authenticating as it proves it is there with this password.
BACKFILL_MONGODB_PASSWORD=$(cat {{.MongoDB.PasswordFile}})
export BACKFILL_MONGODB_PASSWORD
if ! mongo --eval 'db.getSiblingDB("admin").auth("{{.MongoDB.User}}", process.env.BACKFILL_MONGODB_PASSWORD).ok' >/dev/null 2>&1; then
	log "MongoDB: creating user {{.MongoDB.User}}"
	mongo --eval 'db.getSiblingDB("admin").createUser({user: "{{.MongoDB.User}}", pwd: process.env.BACKFILL_MONGODB_PASSWORD, roles: [{role: "readWrite", db: "{{.MongoDB.Database}}"}]})'
fi
unset BACKFILL_MONGODB_PASSWORD
{{- end}}
{{- if .Units}}

# The backfill binary, checked against its SHA-256.
want={{.SHA256}}
have=""
if [ -f {{.BinaryPath}} ]; then
	have=$(sha256sum {{.BinaryPath}} | cut -d' ' -f1)
fi
if [ "$have" != "$want" ]; then
	tmp=$(mktemp {{.BinaryPath}}.XXXXXX)
{{- if .URL}}
	curl -fsSL --retry 5 -o "$tmp" '{{.URL}}'
{{- else}}
	if [ ! -f {{.UploadPath}} ]; then
		rm -f "$tmp"
		log "copy the binary here first: scp backfill root@HOST:{{.UploadPath}}, then run install.sh"
		exit 1
	fi
	cp {{.UploadPath}} "$tmp"
{{- end}}
	if ! echo "$want  $tmp" | sha256sum --check --status; then
		rm -f "$tmp"
		log "the binary's SHA-256 is not $want: not installed"
		exit 1
	fi
	chmod 0755 "$tmp"
	mv -f "$tmp" {{.BinaryPath}}
	restart=--restart
fi

systemctl daemon-reload
systemctl enable{{range .Units}} {{.}}{{end}}
if [ "$restart" = --restart ]; then
	systemctl restart{{range .Units}} {{.}}{{end}}
else
	systemctl start{{range .Units}} {{.}}{{end}}
fi
{{- end}}
log "done"
