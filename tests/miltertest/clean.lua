-- A message without MIME references passes untouched: no edits at all
-- (report.always is off).
--   -D SOCK=inet:PORT@127.0.0.1 -D DIR=tests/miltertest
dofile(DIR .. "/common.lua")
local conn = session(SOCK)
headers(conn, {
    { "From", "alice@sender.example" },
    { "Subject", "hello" },
})
check(mt.bodystring(conn, "just text\r\n"), "body")
expect(conn, "body", SMFIR_CONTINUE)
check(mt.eom(conn), "eom")
expect(conn, "eom", SMFIR_CONTINUE, SMFIR_ACCEPT)
for _, op in ipairs({ MT_HDRADD, MT_HDRCHANGE, MT_HDRDELETE, MT_HDRINSERT, MT_BODYCHANGE, MT_QUARANTINE }) do
    if mt.eom_check(conn, op) then fail("clean message was edited (op " .. op .. ")") end
end
check(mt.disconnect(conn), "disconnect")
mt.echo("clean.lua: ok")
