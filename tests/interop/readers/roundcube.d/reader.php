<?php
/*
 * Roundcube's own IMAP and MIME code (rcube_imap, rcube_message, rcube_washtml) on one
 * message in an IMAP mailbox: what the webmail holds for each part and where its cid
 * map sends each reference of the HTML it shows.
 *
 * php reader.php HOST PORT USER PASSWORD [AUTHCID]  (ROUNDCUBE_CONFIG_DIR names a
 * private configuration directory). Prints one JSON object with Roundcube's raw view;
 * roundcube.d/reader.py turns it into the reader contract (tests/interop/README.md).
 */
define('INSTALL_PATH', (getenv('MIMEREF_ROUNDCUBE_HOME') ?: '/usr/share/roundcube') . '/');
require_once INSTALL_PATH . 'program/include/iniset.php';

[$_, $host, $port, $user, $pass] = array_slice($argv, 0, 5);
$authcid = $argv[5] ?? null;

function fail($msg) {
    fwrite(STDERR, "roundcube reader: $msg\n");
    exit(2);
}

$app = rcube::get_instance();
if ($authcid) {
    // Log in as the admin on behalf of the user (Cyrus proxy authorisation).
    $app->config->set('imap_auth_cid', $authcid);
    $app->config->set('imap_auth_pw', $pass);
    $app->config->set('imap_auth_type', 'PLAIN');
}
$app->storage_init();
$storage = $app->get_storage();
if (!$storage->connect($host, $user, $pass, (int) $port, null)) {
    fail("IMAP login to $host:$port failed: " . $storage->get_error_str());
}
$storage->set_folder('INBOX');
$uids = $storage->list_messages('INBOX');
if (!$uids) {
    fail("no message in INBOX");
}
$message = new rcube_message($uids[0]->uid, 'INBOX');
if (empty($message->headers)) {
    fail("rcube_message could not load the message");
}

$out = ['parts' => [], 'content' => [], 'extbody' => []];
// Every part Roundcube's parse knows, by its IMAP section number.
$walk = function ($part, $parent) use (&$walk, &$out) {
    $id = $part->mime_id === '' || $part->mime_id === null ? '0' : (string) $part->mime_id;
    $out['parts'][] = [
        'part' => $id,
        'parent' => $parent,
        'content_type' => strtolower($part->mimetype ?? ''),
        'content_id' => $part->content_id ?? ($part->headers['content-id'] ?? null),
        'content_location' => $part->content_location ?? ($part->headers['content-location'] ?? null),
        'params' => $part->ctype_parameters ?? [],
    ];
    foreach ($part->parts ?? [] as $k) {
        $walk($k, $id);
    }
};
$walk($message->headers->structure ?? new rcube_message_part(), null);

// The parts shown as the message body, each with the cid map of its multipart/related,
// and where Roundcube's washtml sends each reference (its own lookup, wash_uri).
$wash_uri = new ReflectionMethod('rcube_washtml', 'wash_uri');
$wash_uri->setAccessible(true);
foreach ($message->parts as $part) {
    if ($part->type != 'content' || strtolower($part->mimetype) != 'text/html') {
        continue;
    }
    $html = $message->get_part_body($part->mime_id, true);
    $base = preg_match('/<base\s+href=[\'"]*([^\'"]+)/is', $html, $m) ? $m[1] : '';
    $map = $part->replaces ?? [];
    $washer = new rcube_washtml(['cid_map' => $map, 'base_url' => $base, 'allow_remote' => true]);
    $refs = [];
    foreach (refs_of($html) as $ref) {
        $to = $wash_uri->invoke($washer, $ref, false, true);
        $target = null;
        if (is_string($to) && preg_match('/[?&]_part=([0-9.]+)/', $to, $mm)) {
            $target = $mm[1];
        }
        $refs[] = ['ref' => $ref, 'to' => $target];
    }
    $out['content'][] = ['part' => (string) $part->mime_id, 'refs' => $refs,
                         'cid_map' => array_map(function ($u) {
                             return preg_match('/[?&]_part=([0-9.]+)/', $u, $mm) ? $mm[1] : $u;
                         }, $map)];
}
$storage->close();
echo json_encode($out, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE), "\n";

// src, href, background attributes and CSS url(...), entities decoded: the same
// references the other readers list (tests/interop/lib/readerlib.py).
function refs_of($text) {
    $out = [];
    $rx = ['/\b(?:src|href|background)\s*=\s*(?:"([^"]*)"|\'([^\']*)\'|([^\s>"\']+))/i',
           '/url\(\s*(?:"([^"]*)"|\'([^\']*)\'|([^)\s]*))\s*\)/i'];
    foreach ($rx as $r) {
        preg_match_all($r, $text, $ms, PREG_SET_ORDER);
        foreach ($ms as $m) {
            $v = '';
            for ($i = 1; $i <= 3; $i++) {
                if (isset($m[$i]) && $m[$i] !== '') { $v = $m[$i]; break; }
            }
            $v = trim(strtr($v, ['&amp;' => '&', '&quot;' => '"', '&#39;' => "'", '&lt;' => '<', '&gt;' => '>']));
            if ($v !== '') {
                $out[] = $v;
            }
        }
    }
    return $out;
}
