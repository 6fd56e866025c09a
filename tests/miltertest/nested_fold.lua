-- The nested external-body URL is fixed by replacing the body (the field is
-- inside a message/rfc822 part), the report header is added, and the
-- forged report header the client sent is deleted.
--   -D SOCK=inet:PORT@127.0.0.1 -D DIR=tests/miltertest -D BODY=<body file>
dofile(DIR .. "/common.lua")
local conn = session(SOCK)
headers(conn, {
    { "From", "sender@example.org" },
    { "To", "list@example.org" },
    { "Subject", "forwarded message with an external-body inside" },
    { "X-MIMERef", "ok" },
    { "MIME-Version", "1.0" },
    { "Content-Type", "multipart/mixed; boundary=\"outer\"" },
})
check(mt.bodyfile(conn, BODY), "body")
expect(conn, "body", SMFIR_CONTINUE)
check(mt.eom(conn), "eom")
expect(conn, "eom", SMFIR_CONTINUE, SMFIR_ACCEPT)
if not mt.eom_check(conn, MT_BODYCHANGE) then fail("body not replaced") end
if not mt.eom_check(conn, MT_HDRDELETE, "X-MIMERef") then fail("forged report header kept") end
if not mt.eom_check(conn, MT_HDRADD, "X-MIMERef") then fail("no report header added") end
local report = mt.getheader(conn, "X-MIMERef", 0)
if report == nil or not string.find(report, "extbody-url-unquoted", 1, true) then
    fail("report header: " .. tostring(report))
end
if mt.eom_check(conn, MT_HDRCHANGE, "Content-Type") then fail("top-level Content-Type changed") end
check(mt.disconnect(conn), "disconnect")
mt.echo("nested_fold.lua: ok (" .. report .. ")")
