# ptyd shell integration for fish, run by `fish --init-command` after the user's configuration (see
# ptyd/backends/shell_integration.py). It reads the session's secret from the pipe at fd 6 (fish cannot close a
# descriptor, but the daemon closed the pipe's other end: drained, it holds nothing for the commands that inherit
# it) into a variable that is not exported, and adds the prompt marks as event handlers: a command mark with the
# command line before each command line runs, a prompt mark with $status and $PWD before each prompt. Enter (where
# it runs fish's own `execute`) also marks a line that leaves the command incomplete (a continuation); and a line
# fish cannot parse, which fish would keep in its editor (where every line sent next would be appended to it), is
# checked by `fish --no-execute` (which prints the error and runs nothing), reported (status 123, as eval's) and
# cleared. Ctrl-C reports a command left incomplete as abandoned (130). The prompt and the user's files are left as
# they are.
if status is-interactive; and set -q PTYD_SHELL_KEY_FD
    read -g __ptyd_key </dev/fd/$PTYD_SHELL_KEY_FD # `read <&6` reads nothing in fish 3.6
    set -e PTYD_SHELL_KEY_FD
    # Where the configuration directory is read-only (a sandbox's home where fish never ran), fish's first-run
    # setup would set universal variables it cannot save, and print an error at every prompt: it is taken as done,
    # its two variables set for this shell alone.
    if not test -w $__fish_config_dir
        set -q __fish_initialized; or set -g __fish_initialized 3400
        set -q fish_key_bindings; or set -g fish_key_bindings fish_default_key_bindings
    end
    function __ptyd_prompt --on-event fish_prompt
        set -l s $status
        builtin printf '\e]6973;%s;D;%s;%s\a' $__ptyd_key $s $PWD
    end
    function __ptyd_preexec --on-event fish_preexec
        set -l line (string sub -l 2000 -- "$argv[1]" | string collect)
        builtin printf '\e]6973;%s;C;%s\a' $__ptyd_key (string escape --style=url -- "$line")
    end
    function __ptyd_cancel --on-event fish_cancel
        builtin printf '\e]6973;%s;D;130;%s\a' $__ptyd_key $PWD
    end
    function __ptyd_enter
        commandline --is-valid
        switch $status
            case 2
                builtin printf '\e]6973;%s;P\a' $__ptyd_key
            case 1
                set -l fish (status fish-path)
                builtin echo
                commandline | string collect | $fish --no-execute
                builtin printf '\e]6973;%s;D;123;%s\a' $__ptyd_key $PWD
                commandline -r ''
                commandline -f repaint
                return
        end
        commandline -f execute
    end
    for key in \r \n
        bind $key | string match -q -- '*execute' && bind $key __ptyd_enter
        bind -M insert $key 2>/dev/null | string match -q -- '*execute' && bind -M insert $key __ptyd_enter
    end
    true # the first prompt shows no status of this file's (fish's prompt said [1] where no insert mode is bound)
end
