# ptyd shell integration for bash, loaded as --rcfile (see ptyd/backends/shell_integration/__init__.py).
# It takes the session's secret first, from fd 6 (closed at once: nothing the shell runs inherits it, and it is
# not in /proc/PID/environ), loads what bash would have loaded, then installs the prompt marks. PS1 and the
# user's files are left as they are.
if [ "${PTYD_SHELL_KEY_FD-}" = 6 ]; then IFS= read -r __ptyd_key <&6; exec 6<&-; else __ptyd_key=${PTYD_SHELL_KEY-}; fi
__ptyd_hook=${PTYD_SHELL_HOOK-}
__ptyd_rc=${PTYD_SHELL_RC-default}
unset PTYD_SHELL_KEY PTYD_SHELL_KEY_FD PTYD_SHELL_HOOK PTYD_SHELL_RC
case $__ptyd_rc in
  default) [ -r ~/.bashrc ] && . ~/.bashrc ;;  # bash itself read its system file (/etc/bash.bashrc) if built to
  login)
    [ -r /etc/profile ] && . /etc/profile
    if [ -r ~/.bash_profile ]; then . ~/.bash_profile
    elif [ -r ~/.bash_login ]; then . ~/.bash_login
    elif [ -r ~/.profile ]; then . ~/.profile
    fi ;;
  *) [ -r "$__ptyd_rc" ] && . "$__ptyd_rc" ;;
esac
[ -n "$__ptyd_key" ] && eval "$__ptyd_hook"
unset __ptyd_hook __ptyd_rc
