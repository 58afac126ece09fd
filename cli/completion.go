package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// commandFlags returns a command's flag set (nil for commands without flags), the same
// one the command parses: completion cannot offer a flag the command does not take.
func commandFlags(name string) *flag.FlagSet {
	quiet := IO{Stdout: io.Discard, Stderr: io.Discard}
	switch name {
	case "serve":
		c, _, _ := serveFlags(quiet)
		return c.fs
	case "run":
		c, _ := runFlags(quiet)
		return c.fs
	case "probe":
		c, _ := jsonFlags("probe", "report", quiet)
		return c.fs
	case "config":
		c, _ := jsonFlags("config", "configuration", quiet)
		return c.fs
	}
	return nil
}

// flagNames lists a command's flags as "--name", sorted.
func flagNames(name string) []string {
	var out []string
	if fs := commandFlags(name); fs != nil {
		fs.VisitAll(func(f *flag.Flag) { out = append(out, "--"+f.Name) })
	}
	slices.Sort(out)
	return out
}

var shells = []string{"bash", "zsh", "fish"}

func completionCmd(args []string, stdio IO) int {
	if len(args) != 1 || !slices.Contains(shells, args[0]) {
		fmt.Fprintf(stdio.Stderr, "airlock completion: give one shell: %s\n"+
			"  bash: source <(airlock completion bash)\n"+
			"  zsh:  airlock completion zsh > \"${fpath[1]}/_airlock\"\n"+
			"  fish: airlock completion fish > ~/.config/fish/completions/airlock.fish\n", strings.Join(shells, ", "))
		return exitUsage
	}
	fmt.Fprint(stdio.Stdout, completion(args[0]))
	return exitOK
}

// completion is the script for shell, generated from the command list and each command's
// flag set.
func completion(shell string) string {
	var b strings.Builder
	names := strings.Join(commandNames(), " ")
	switch shell {
	case "bash":
		b.WriteString("# bash completion for airlock: source <(airlock completion bash)\n")
		b.WriteString("_airlock() {\n")
		b.WriteString("    local cur=${COMP_WORDS[COMP_CWORD]} cmd=serve w\n")
		b.WriteString("    for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do\n")
		fmt.Fprintf(&b, "        case $w in %s) cmd=$w; break;; esac\n", strings.ReplaceAll(names, " ", "|"))
		b.WriteString("    done\n")
		b.WriteString("    local flags\n")
		b.WriteString("    case $cmd in\n")
		for _, c := range commands {
			if f := flagNames(c.name); len(f) > 0 {
				fmt.Fprintf(&b, "    %s) flags=%q;;\n", c.name, strings.Join(f, " "))
			}
		}
		fmt.Fprintf(&b, "    completion) COMPREPLY=($(compgen -W %q -- \"$cur\")); return;;\n", strings.Join(shells, " "))
		b.WriteString("    esac\n")
		b.WriteString("    if [[ $cur == -* ]]; then\n")
		b.WriteString("        COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n")
		b.WriteString("    elif [[ $cmd == serve && $COMP_CWORD -eq 1 ]]; then\n")
		fmt.Fprintf(&b, "        COMPREPLY=($(compgen -W %q -- \"$cur\"))\n", names)
		b.WriteString("    else\n")
		b.WriteString("        COMPREPLY=($(compgen -f -- \"$cur\"))\n")
		b.WriteString("    fi\n")
		b.WriteString("}\n")
		b.WriteString("complete -o filenames -F _airlock airlock\n")
	case "zsh":
		b.WriteString("#compdef airlock\n")
		b.WriteString("# zsh completion for airlock: airlock completion zsh > \"${fpath[1]}/_airlock\"\n")
		b.WriteString("_airlock() {\n")
		b.WriteString("    local -a cmds\n")
		b.WriteString("    cmds=(\n")
		for _, c := range commands {
			fmt.Fprintf(&b, "        %s\n", zshQuote(c.name+":"+c.summary))
		}
		b.WriteString("    )\n")
		b.WriteString("    local cmd=serve w\n")
		b.WriteString("    for w in \"${words[@]:1:CURRENT-2}\"; do\n")
		fmt.Fprintf(&b, "        case $w in (%s) cmd=$w; break;; esac\n", strings.ReplaceAll(names, " ", "|"))
		b.WriteString("    done\n")
		b.WriteString("    case $cmd in\n")
		for _, c := range commands {
			if fs := commandFlags(c.name); fs != nil {
				fmt.Fprintf(&b, "    (%s) _arguments", c.name)
				fs.VisitAll(func(f *flag.Flag) {
					fmt.Fprintf(&b, " \\\n        %s", zshQuote("--"+f.Name+"["+zshEscape(f.Usage)+"]"+zshValue(f)))
				})
				if c.name == "run" {
					b.WriteString(" \\\n        '*:file:_files'")
				}
				b.WriteString(";;\n")
			}
		}
		fmt.Fprintf(&b, "    (completion) _values shell %s;;\n", strings.Join(shells, " "))
		b.WriteString("    esac\n")
		b.WriteString("    (( CURRENT == 2 )) && _describe command cmds\n")
		b.WriteString("}\n")
		b.WriteString("compdef _airlock airlock\n")
	case "fish":
		b.WriteString("# fish completion for airlock: airlock completion fish > ~/.config/fish/completions/airlock.fish\n")
		b.WriteString("complete -c airlock -f\n")
		for _, c := range commands {
			fmt.Fprintf(&b, "complete -c airlock -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
		}
		for _, c := range commands {
			fs := commandFlags(c.name)
			if fs == nil {
				continue
			}
			cond := "__fish_seen_subcommand_from " + c.name
			if c.name == "serve" {
				cond = "not __fish_seen_subcommand_from " + strings.Join(commandNames()[1:], " ")
			}
			fs.VisitAll(func(f *flag.Flag) {
				req := " -r"
				if isBool(f) {
					req = ""
				}
				fmt.Fprintf(&b, "complete -c airlock -n %s -l %s%s -d %s\n", fishQuote(cond), f.Name, req, fishQuote(f.Usage))
			})
		}
		fmt.Fprintf(&b, "complete -c airlock -n '__fish_seen_subcommand_from run' -F\n")
		fmt.Fprintf(&b, "complete -c airlock -n '__fish_seen_subcommand_from completion' -a %s\n", fishQuote(strings.Join(shells, " ")))
	}
	return b.String()
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// zshValue is the value part of an _arguments spec: none for booleans, files for paths.
func zshValue(f *flag.Flag) string {
	switch {
	case isBool(f):
		return ""
	case f.Name == "config" || f.Name == "out" || strings.HasSuffix(f.Name, "-file") || f.Name == "audit":
		return ":path:_files"
	}
	return ":value: "
}

// zshEscape escapes what _arguments gives a meaning inside [description].
func zshEscape(s string) string {
	return strings.NewReplacer("[", "\\[", "]", "\\]", ":", "\\:").Replace(s)
}

func zshQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}
