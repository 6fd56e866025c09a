-- With "extbody-*" = "reject" the end of message gets a reply code (the
-- configured 5xx) and no edits.
--   -D SOCK=inet:PORT@127.0.0.1 -D DIR=tests/miltertest
dofile(DIR .. "/common.lua")
local conn = session(SOCK)
headers(conn, {
    { "From", "alice@sender.example" },
    { "MIME-Version", "1.0" },
    { "Content-Type", "message/external-body; access-type=URL; url=http://example.org/a/b/report.pdf" },
})
check(mt.bodystring(conn, "Content-Type: application/pdf\r\nContent-ID: <report@example.org>\r\n\r\n"), "body")
expect(conn, "body", SMFIR_CONTINUE)
check(mt.eom(conn), "eom")
expect(conn, "eom", SMFIR_REPLYCODE)
-- The reply text is asserted behind Postfix and Sendmail: miltertest 1.5's
-- MT_SMTPREPLY check does not match libmilter-style 'y' replies.
for _, op in ipairs({ MT_HDRADD, MT_HDRCHANGE, MT_HDRDELETE, MT_BODYCHANGE }) do
    if mt.eom_check(conn, op) then fail("rejected message was also edited (op " .. op .. ")") end
end
check(mt.disconnect(conn), "disconnect")
mt.echo("reject.lua: ok")
