"""A terminal program under a private tmux server, read through capture-pane: what the
terminal readers (NeoMutt, Alpine) share. One server per reader run (its own socket,
`-f /dev/null`: no user configuration), killed at the end; every wait polls the screen
until it holds what is wanted and stops moving, within the reader's deadline."""
import subprocess
import time


class Tmux:
    def __init__(self, sock, deadline):
        self.sock = sock
        self.deadline = deadline
        self.started = time.monotonic()

    def run(self, *args, check=True):
        r = subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           errors="replace", timeout=10)
        if check and r.returncode != 0:
            raise RuntimeError("tmux %s: %s" % (args[0], r.stderr.strip()))
        return r.stdout

    def capture(self, escapes=False):
        """The pane's lines (`escapes`: with the terminal's attribute sequences). -J joins
        wrapped lines: a long line reads as one, whatever the width."""
        lines = self.run("capture-pane", "-p", "-J", *(["-e"] if escapes else []),
                         "-t", "r").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return lines

    def keys(self, *keys):
        self.run("send-keys", "-t", "r", *keys)

    def left(self):
        return self.deadline - (time.monotonic() - self.started)

    def wait(self, pred, what, settle=0.08):
        """Poll the screen until pred(lines) holds and the screen is unchanged for
        `settle` seconds; return the lines."""
        last, since = None, None
        while True:
            lines = self.capture()
            now = time.monotonic()
            if pred(lines):
                if lines == last:
                    if now - since >= settle:
                        return lines
                else:
                    last, since = lines, now
            else:
                last, since = None, None
            if self.left() <= 0:
                raise TimeoutError("screen did not show %s; last screen:\n%s"
                                   % (what, "\n".join(l.rstrip() for l in lines if l.strip())))
            time.sleep(0.03)

    def kill(self):
        try:
            subprocess.run(["tmux", "-L", self.sock, "kill-server"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=5)
        except Exception:
            pass
