"""Regenerate docs/web-dashboard.png: a daemon of its own with a few agents' sessions (a build and a coloured ls,
vim, htop) in colour, the editor zoomed,
``ptyd web`` and headless Chromium. From the checkout: ``PYTHONPATH=tests .venv/bin/python -m web.make_screenshot``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from conftest import ROOT, Daemon, Shell
from web.cdp import Browser
from web.test_dashboard import Web, card_text


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ptyd-shot-") as tmp:
        base = Path(tmp)
        base.chmod(0o700)
        daemon = Daemon(base, f'recording_dir = "{base / "recordings"}"\nrecord_agents = ["ci-bot"]\n')
        daemon.start()
        web = Web(daemon, "127.0.0.1:0")
        try:
            with daemon.rpc() as rpc:
                ci = rpc.call("agent_register", name="ci-bot")["token"]
                editor = rpc.call("agent_register", name="refactor-agent")["token"]
                build = Shell(rpc, ci, name="build", env={"PS1": "$ "}, cols=80, rows=14, cwd=str(ROOT))
                build.send("python3 -m compileall -f -q ptyd_web && echo build ok\n", timeout_ms=60_000)
                build.send("ls --color=always ptyd ptyd_web\n")
                vim = Shell(rpc, editor, name="edit", env={"PS1": "$ "}, cols=80, rows=14, cwd=str(ROOT))
                vim.send(f"HOME={base} vim -u NONE -N +'syntax on' ptyd_web/hub.py\n", idle_ms=5_000)
                top = Shell(rpc, editor, name="monitor", env={"PS1": "$ "}, cols=80, rows=14)
                top.send(f"HOME={base} htop -d 600 -p $$\n", timeout_ms=15_000)  # this session's shell only
                with Browser(base / "chromium") as browser:
                    browser.call(
                        "Emulation.setDeviceMetricsOverride", width=1400, height=860, deviceScaleFactor=1, mobile=False
                    )
                    browser.navigate(web.url)
                    for name, text in (("build", "build ok"), ("edit", "dashboard's one link"), ("monitor", "PID")):
                        browser.wait_for(f"{card_text(name)}.includes({text!r})")
                    # The editor zoomed; every picture the screen as it is now (the hub reads them at most twice
                    # a second) and loaded.
                    browser.evaluate(
                        "[...document.querySelectorAll('#screens .card')]"
                        ".find(c => c.querySelector('h2').textContent.startsWith('edit')).click()"
                    )
                    browser.wait_for(
                        "[...document.querySelectorAll('.card img')].every(i => !i.hidden && i.complete && "
                        "i.naturalWidth > 0 && i.dataset.current === 'true')"
                    )
                    out = ROOT / "docs" / "web-dashboard.png"
                    browser.screenshot(out)
                    print(out)
        finally:
            web.stop()
            daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
