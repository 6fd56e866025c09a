-- A top-level external-body URL is fixed with change_header on
-- Content-Type (index 1); the body is left alone.
--   -D SOCK=inet:PORT@127.0.0.1 -D DIR=tests/miltertest
dofile(DIR .. "/common.lua")
local conn = session(SOCK)
headers(conn, {
    { "From", "alice@sender.example" },
    { "Subject", "top-level external-body" },
    { "MIME-Version", "1.0" },
    { "Content-Type", "message/external-body; access-type=URL; url=http://example.org/a/b/report.pdf" },
})
check(mt.bodystring(conn, "Content-Type: application/pdf\r\nContent-ID: <report@example.org>\r\n\r\n"), "body")
expect(conn, "body", SMFIR_CONTINUE)
check(mt.eom(conn), "eom")
expect(conn, "eom", SMFIR_CONTINUE, SMFIR_ACCEPT)
if not mt.eom_check(conn, MT_HDRCHANGE, "Content-Type") then fail("Content-Type not changed") end
if mt.eom_check(conn, MT_BODYCHANGE) then fail("body replaced for a top-level fix") end
check(mt.disconnect(conn), "disconnect")
mt.echo("top_level.lua: ok")
