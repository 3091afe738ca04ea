#!/bin/sh
# backfill-unlock on {{.Host}} of cluster {{.Cluster}}: opens the LUKS data
# volume that holds {{join .Dirs " and "}}, with a key read from standard input
# and kept in RAM (/run) only while the volume opens: never on this disk.
# Then it mounts the volume, and starts {{join .Units ", "}}, which do not start before.
# Rendered by `backfill provision render`: change the inventory, not this file.
#
#   once, to format a new volume (erases it):
#     ssh root@HOST backfill-unlock --format /dev/disk/by-id/VOLUME < cluster.keys/HOST.luks
#   after every boot:
#     ssh root@HOST backfill-unlock /dev/disk/by-id/VOLUME < cluster.keys/HOST.luks
set -eu

name=backfill-data
mnt=/mnt/backfill-data
format=no
if [ "${1:-}" = "--format" ]; then
	format=yes
	shift
fi
dev=${1:?usage: backfill-unlock [--format] DEVICE < KEY-FILE}

key=$(mktemp -p /run backfill-luks.XXXXXX)
trap 'rm -f "$key"' EXIT
cat >"$key"
if [ ! -s "$key" ]; then
	echo "backfill-unlock: no key on standard input" >&2
	exit 2
fi

if [ "$format" = yes ]; then
	cryptsetup luksFormat --batch-mode --type luks2 --key-file="$key" "$dev"
fi
if [ ! -e "/dev/mapper/$name" ]; then
	cryptsetup open --key-file="$key" "$dev" "$name"
fi
rm -f "$key"
if [ "$format" = yes ]; then
	mkfs.ext4 -q -L "$name" "/dev/mapper/$name"
fi
mkdir -p "$mnt"
mountpoint -q "$mnt" || mount "/dev/mapper/$name" "$mnt"
{{- range .Mounts}}
mkdir -p "$mnt/{{.Sub}}" {{.Dir}}
# What install put there (the dispatcher's records) moves onto the volume.
mountpoint -q {{.Dir}} || cp -an {{.Dir}}/. "$mnt/{{.Sub}}/"
chown {{.Owner}} "$mnt/{{.Sub}}"
chmod 0750 "$mnt/{{.Sub}}"
mountpoint -q {{.Dir}} || mount --bind "$mnt/{{.Sub}}" {{.Dir}}
{{- end}}
systemctl start {{join .Units " "}}
echo "backfill-unlock: {{join .Dirs " and "}} on the encrypted volume; started {{join .Units ", "}}"
