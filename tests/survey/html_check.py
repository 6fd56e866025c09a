#!/usr/bin/env python3
"""Checks the page of `survey --format html` is well-formed HTML that can run nothing.

Python's html.parser forgives anything, so the strictness is here: every element but
the void ones is closed, in order; no end tag without its start; ids unique; no element
that runs, loads or links (script, img, iframe, object, embed, link, base, form, a,
source, video, audio), no event handler attribute, no href or src; no `<` or `>` left
in text (mail must arrive escaped); no control character; the Content-Security-Policy
as the page promises it. Standard library only (CI installs nothing for this).

Usage: html_check.py PAGE.html   exit 1 and one line per problem on failure.
"""
import sys
from html.parser import HTMLParser

VOID = {"meta", "br", "hr", "wbr", "col", "input", "img", "source", "link", "base", "embed"}
# SVG elements that close themselves.
SELF = {"rect", "circle", "path", "line"}
FORBIDDEN = {"script", "img", "iframe", "object", "embed", "link", "base", "form", "a",
             "source", "video", "audio", "frame", "frameset", "noscript", "template"}
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


class Strict(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.stack = []
        self.problems = []
        self.ids = set()
        self.csp = None
        self.doctype = False

    def where(self):
        return "line %d" % self.getpos()[0]

    def check_attrs(self, tag, attrs):
        if tag in FORBIDDEN:
            self.problems.append("%s: <%s>" % (self.where(), tag))
        for k, v in attrs:
            if k.startswith("on") or k in ("href", "src", "srcset", "action", "style"):
                self.problems.append("%s: attribute %s on <%s>" % (self.where(), k, tag))
            if k == "id":
                if v in self.ids:
                    self.problems.append("%s: id %r twice" % (self.where(), v))
                self.ids.add(v)
        d = dict(attrs)
        if tag == "meta" and d.get("http-equiv", "").lower() == "content-security-policy":
            self.csp = d.get("content")

    def handle_decl(self, decl):
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        self.check_attrs(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.check_attrs(tag, attrs)
        if tag not in SELF and tag not in VOID:
            self.problems.append("%s: <%s/> is not an element that closes itself" % (self.where(), tag))

    def handle_endtag(self, tag):
        if tag in VOID:
            self.problems.append("%s: </%s>" % (self.where(), tag))
        elif not self.stack or self.stack[-1] != tag:
            self.problems.append("%s: </%s> closes <%s>" % (self.where(), tag, self.stack[-1] if self.stack else "nothing"))
        else:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] == "style":
            return
        if "<" in data or ">" in data:
            self.problems.append("%s: unescaped < or > in text: %r" % (self.where(), data[:80]))

    def handle_pi(self, data):
        self.problems.append("%s: processing instruction" % self.where())

    def unknown_decl(self, data):
        self.problems.append("%s: declaration %r" % (self.where(), data[:40]))


def main(path):
    raw = open(path, "rb").read()
    problems = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        print("%s: not UTF-8: %s" % (path, e))
        return 1
    for i, c in enumerate(text):
        if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0:
            problems.append("control character U+%04X at %d" % (ord(c), i))
            break
    p = Strict()
    p.feed(text)
    p.close()
    problems += p.problems
    if p.stack:
        problems.append("not closed at the end: %s" % " ".join(p.stack))
    if not p.doctype:
        problems.append("no <!DOCTYPE html>")
    if p.csp != CSP:
        problems.append("Content-Security-Policy is %r" % p.csp)
    for q in problems[:30]:
        print("%s: %s" % (path, q))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
