# ptyd shell integration for zsh (see ptyd/backends/shell_integration.py): zsh starts with ZDOTDIR pointing here.
# Hand ZDOTDIR back to the user's (so .zprofile, .zshrc and .zlogin are theirs), load their .zshenv, then, for an
# interactive shell, add the prompt marks as the first precmd hook and a preexec hook. PS1 is left alone.
if [[ -n "${PTYD_USER_ZDOTDIR+set}" ]]; then
  ZDOTDIR=$PTYD_USER_ZDOTDIR
else
  unset ZDOTDIR
fi
unset PTYD_USER_ZDOTDIR
# The secret from fd 6, closed at once (not in the environment: /proc/PID/environ would keep it).
typeset -g __ptyd_key
if [[ "${PTYD_SHELL_KEY_FD-}" == 6 ]]; then IFS= read -r __ptyd_key <&6; exec 6<&-; else __ptyd_key=${PTYD_SHELL_KEY-}; fi
unset PTYD_SHELL_KEY PTYD_SHELL_KEY_FD
[[ -r "${ZDOTDIR:-$HOME}/.zshenv" ]] && builtin source "${ZDOTDIR:-$HOME}/.zshenv"
if [[ -o interactive && -n "$__ptyd_key" ]]; then
  # The continuation prompt's mark, zero-width (%{ %}), put into PS2 at each prompt (after the user's files set
  # it): the lines read at PS2 belong to the command they continue. PS2 then holds the secret: never exported.
  __ptyd_precmd() {
    local s=$?
    builtin printf '\033]6973;%s;D;%s;%s\007' "$__ptyd_key" "$s" "$PWD"
    [[ $PS2 == *$'\e]6973;'* ]] || { PS2=$'%{\e]6973;'"$__ptyd_key"$';P\a%}'"$PS2"; typeset -g +x PS2 }
    return $s
  }
  __ptyd_preexec() { builtin printf '\033]6973;%s;C\007' "$__ptyd_key" }
  typeset -ga precmd_functions preexec_functions
  precmd_functions=(__ptyd_precmd $precmd_functions)
  preexec_functions+=(__ptyd_preexec)
fi
