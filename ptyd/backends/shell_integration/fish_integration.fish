# ptyd shell integration for fish, run by `fish --init-command` after the user's configuration (see
# ptyd/backends/shell_integration.py). It takes the session's secret out of the environment and adds the prompt
# marks as event handlers: a command mark before each command line runs, a prompt mark with $status and $PWD
# before each prompt. The prompt and the user's files are left as they are.
if status is-interactive; and set -q PTYD_SHELL_KEY
    set -g __ptyd_key $PTYD_SHELL_KEY
    set -e PTYD_SHELL_KEY
    function __ptyd_prompt --on-event fish_prompt
        set -l s $status
        builtin printf '\e]6973;%s;D;%s;%s\a' $__ptyd_key $s $PWD
    end
    function __ptyd_preexec --on-event fish_preexec
        builtin printf '\e]6973;%s;C\a' $__ptyd_key
    end
end
