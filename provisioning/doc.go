// Package provisioning owns the deployment of a backfill cluster to cheap
// VPS droplets: the inventory that describes the cluster, and everything
// each machine needs, rendered from it.
//
// Data flows one way. Load reads a TOML inventory (the cluster, its hosts
// with addresses, memory and roles, the admin's SSH keys, the binary, the
// records and mappings, optional MongoDB) and checks it, each problem an
// *Error naming the file, line and field. Render works out who talks to
// whom at which address with how much memory, loads the cluster's secrets
// from the inventory's keys directory (making the missing ones once:
// CURVE key pairs through wire.EnsureKeys, a CA, certificates and a
// password for MongoDB), and writes per host a cloud-init user-data, an
// equivalent idempotent install.sh and, under files/, every file the host
// receives at its path: systemd units, the nftables ruleset, the SSH and
// fail2ban drop-ins, journald and unattended-upgrades settings, the
// host's keys and its peers' public keys, the MongoDB URI (password
// included) in a file the units name with --store-file, never on a
// command line, and the activation script both installers run. The files come from the templates embedded under
// templates/; the renderer only fills them in. Check validates a rendered
// directory with the real tools (cloud-init, systemd-analyze, shellcheck,
// nft, sshd, fail2ban-client), and fails when one is missing.
//
//	inv, err := provisioning.Load("cluster.toml")
//	…
//	hosts, err := provisioning.Render(inv, "deploy")
//	…
//	report, err := provisioning.Check(ctx, "deploy")
//
// The rehearsal test deploys a rendered cluster into network namespaces
// on one machine, with each host's firewall, a render host with Chromium
// and a MongoDB-protocol server that requires the rendered password, and
// crawls through it.
// Nothing here is safe for concurrent use on one Inventory.
package provisioning
