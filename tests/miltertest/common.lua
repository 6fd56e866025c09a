-- Shared helpers for the miltertest scripts (loaded with dofile by each).
-- miltertest exits 1 on error() without printing the message: say it first.
function fail(msg)
    mt.echo("FAIL: " .. msg)
    error(msg)
end

function check(err, what)
    if err ~= nil then fail(what .. ": " .. tostring(err)) end
end

function expect(conn, what, ...)
    local got = mt.getreply(conn)
    for _, want in ipairs({ ... }) do
        if got == want then return got end
    end
    fail(string.format("%s: unexpected reply %s", what, tostring(got)))
end

-- Runs one protocol step unless the milter negotiated it away (miltertest
-- refuses a step the filter disabled); with a "no reply" option negotiated
-- miltertest itself reports CONTINUE.
function step(conn, what, skip_opt, f, ...)
    if skip_opt ~= nil and mt.test_option(conn, skip_opt) then return end
    check(f(conn, ...), what)
    expect(conn, what, SMFIR_CONTINUE)
end

-- Connect, and walk an inbound client through connect .. rcpt.
function session(sock)
    local conn = mt.connect(sock, 20, 0.25)
    if conn == nil then fail("cannot connect to " .. sock) end
    check(mt.negotiate(conn, nil, nil, nil), "negotiate")
    -- The engine needs the headers and the body.
    if mt.test_option(conn, SMFIP_NOHDRS) then fail("milter skips headers") end
    if mt.test_option(conn, SMFIP_NOBODY) then fail("milter skips the body") end
    mt.macro(conn, SMFIC_CONNECT, "j", "mx.example", "{daemon_name}", "mx")
    step(conn, "connect", SMFIP_NOCONNECT, mt.conninfo, "client.example", "192.0.2.7")
    step(conn, "helo", SMFIP_NOHELO, mt.helo, "client.example")
    mt.macro(conn, SMFIC_MAIL, "i", "MTQUEUEID")
    step(conn, "mail", SMFIP_NOMAIL, mt.mailfrom, "<alice@sender.example>")
    step(conn, "rcpt", SMFIP_NORCPT, mt.rcptto, "<bob@receiver.example>")
    return conn
end

-- Send header fields given as { {name, value}, ... } and end of headers.
function headers(conn, list)
    for _, h in ipairs(list) do
        step(conn, "header " .. h[1], nil, mt.header, h[1], h[2])
    end
    step(conn, "eoh", SMFIP_NOEOH, mt.eoh)
end
