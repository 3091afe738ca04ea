package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"backfill/provisioning"
)

// cmdProvision renders and checks what the droplets of a cluster need.
func cmdProvision(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprint(stderr, `usage:
  backfill provision init FILE            write a commented example inventory to edit
  backfill provision render FILE -o DIR   write each host's user-data, install.sh and files
  backfill provision check DIR|FILE       validate rendered output (or an inventory, rendered
                                          to a temporary directory) with cloud-init,
                                          systemd-analyze, shellcheck, nft, sshd and fail2ban
`)
	}
	if len(args) == 0 {
		usage()
		return fmt.Errorf("%w: name a subcommand: init, render or check", errUsage)
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage()
		return flag.ErrHelp
	case "init":
		fs := newFlagSet("provision init", stderr)
		path, err := oneArg(fs, args[1:], "the inventory file to write, e.g. cluster.toml")
		if err != nil {
			return err
		}
		if err := provisioning.WriteExample(path); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s: edit it, then: backfill provision render %s -o deploy/\n", path, path)
		return nil
	case "render":
		fs := newFlagSet("provision render", stderr)
		out := fs.String("o", "deploy", "output directory: one subdirectory per host")
		path, err := oneArg(fs, args[1:], "the inventory file, e.g. cluster.toml")
		if err != nil {
			return err
		}
		inv, err := provisioning.Load(path)
		if err != nil {
			return err
		}
		hosts, err := provisioning.Render(inv, *out)
		if err != nil {
			return err
		}
		for _, h := range hosts {
			fmt.Fprintf(stdout, "%s: %s/{%s,%s,%s/}\n", h.Name, h.Dir, provisioning.UserDataFile, provisioning.InstallFile, provisioning.FilesDir)
			for _, n := range h.Notes {
				fmt.Fprintf(stdout, "  note: %s\n", n)
			}
		}
		fmt.Fprintf(stdout, "secrets kept in %s; validate with: backfill provision check %s\n", inv.KeysDir(), *out)
		return nil
	case "check":
		fs := newFlagSet("provision check", stderr)
		path, err := oneArg(fs, args[1:], "the rendered directory (or an inventory file)")
		if err != nil {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		var rep *provisioning.Report
		if info.IsDir() {
			rep, err = provisioning.Check(ctx, path)
		} else {
			rep, err = provisioning.CheckInventory(ctx, path)
		}
		if rep != nil {
			for _, l := range rep.Passed {
				fmt.Fprintf(stdout, "ok   %s\n", l)
			}
			for _, w := range rep.Warnings {
				fmt.Fprintf(stdout, "warn %s\n", w)
			}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d checks passed\n", len(rep.Passed))
		return nil
	default:
		usage()
		return fmt.Errorf("%w: unknown subcommand %q (want init, render or check)", errUsage, args[0])
	}
}

// oneArg parses fs's flags around exactly one argument, what.
func oneArg(fs *flag.FlagSet, args []string, what string) (string, error) {
	// The argument may come before the flags (render cluster.toml -o deploy).
	var pos []string
	for len(args) > 0 {
		if err := parseFlags(fs, args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		return "", fmt.Errorf("%w: want one argument, %s", errUsage, what)
	}
	return pos[0], nil
}
