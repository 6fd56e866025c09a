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

$out = ['parts' => [], 'content' => [], 'extbody' => [], 'listed' => [], 'appended' => [],
        'names' => [], 'opens' => []];
// Every part Roundcube's parse knows, by its IMAP section number.
$walk = function ($part, $parent) use (&$walk, &$out) {
    $id = $part->mime_id === '' || $part->mime_id === null ? '0' : (string) $part->mime_id;
    $mt = strtolower($part->mimetype ?? '');
    if ($mt === 'message/rfc822') {
        /* rcube_message::parse_structure reads a forwarded message's header from the part's
         * body, decoded by its Content-Transfer-Encoding, and shows it (Subject/From) with
         * its parts below the body: the message is offered when that header was found. */
        $h = is_array($part->headers) ? $part->headers : [];
        $out['opens'][$id] = (isset($h['subject']) || !empty($h['from'])) ? 'message'
            : (((int) ($part->size ?? 0)) > 0 ? 'undecodable' : 'empty');
    } elseif ($mt === 'application/octet-stream') {
        $out['opens'][$id] = ((int) ($part->size ?? 0)) > 0 ? 'file' : 'empty';
    }
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
    // the image references, each where wash_uri sends it (the URL the browser loads)
    $images = [];
    foreach (image_refs_of($html) as $ref) {
        $to = $wash_uri->invoke($washer, $ref, false, true);
        $images[] = ['ref' => $ref,
                     'to' => is_string($to) && preg_match('/[?&]_part=([0-9.]+)/', $to, $mm) ? $mm[1] : null];
    }
    $out['content'][] = ['part' => (string) $part->mime_id, 'refs' => $refs, 'images' => $images,
                         'cid_map' => array_map(function ($u) {
                             return preg_match('/[?&]_part=([0-9.]+)/', $u, $mm) ? $mm[1] : $u;
                         }, $map)];
}
// The message view (program/actions/mail/show.php, rcmail_action_mail_show): the
// attachment list is rcube_message's `attachments` without the images that
// is_attachment() calls inline (disposition inline with a Content-ID, or a child of a
// multipart/related) (message_attachments()); the images that are listed are also shown
// after the body (message_body(), 'inline_images' on by default).
$is_attachment = new ReflectionMethod('rcmail_action_mail_show', 'is_attachment');
$is_attachment->setAccessible(true);
foreach ($message->attachments as $attach_prop) {
    $mimetype = rcube_mime::fix_mimetype($attach_prop->mimetype);
    if ($mimetype == 'application/octet-stream' && !empty($attach_prop->filename)
        && ($type = rcube_mime::file_ext_type($attach_prop->filename))) {
        $mimetype = $type;
    }
    $normal = $is_attachment->invoke(null, $message, $attach_prop);
    if (strpos($mimetype, 'image/') === 0 && !$normal) {
        continue;
    }
    $out['listed'][] = (string) $attach_prop->mime_id;
    // the name the attachment list shows (the message view's attachment_name(): the
    // part's filename as rcube_message decoded it, else "Message part N.ext")
    $out['names'][(string) $attach_prop->mime_id] = rcmail_action_mail_index::attachment_name($attach_prop, true);
    if ($app->config->get('inline_images', true) && rcmail_action_mail_show::part_image_type($attach_prop) && $normal) {
        $out['appended'][] = (string) $attach_prop->mime_id;
    }
}
$storage->close();
echo json_encode($out, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE), "\n";

// The references loaded as images: img (and input type=image) src, any background
// attribute, CSS url(...); decoded as refs_of() decodes them.
function image_refs_of($text) {
    $out = [];
    $dec = function ($v) {
        return trim(strtr($v, ['&amp;' => '&', '&quot;' => '"', '&#39;' => "'", '&lt;' => '<', '&gt;' => '>']));
    };
    preg_match_all('/<([A-Za-z][A-Za-z0-9-]*)((?:[^>"\']|"[^"]*"|\'[^\']*\')*)>/', $text, $tags, PREG_SET_ORDER);
    foreach ($tags as $t) {
        $tag = strtolower($t[1]);
        $img = $tag == 'img' || ($tag == 'input' && preg_match('/\btype\s*=\s*["\']?image\b/i', $t[2]));
        preg_match_all('/\b(src|href|background)\s*=\s*(?:"([^"]*)"|\'([^\']*)\'|([^\s>"\']+))/i', $t[2], $ms, PREG_SET_ORDER);
        foreach ($ms as $m) {
            $v = '';
            for ($i = 2; $i <= 4; $i++) {
                if (isset($m[$i]) && $m[$i] !== '') { $v = $m[$i]; break; }
            }
            $v = $dec($v);
            $name = strtolower($m[1]);
            if ($v !== '' && ($name == 'background' || ($name == 'src' && $img))) {
                $out[] = $v;
            }
        }
    }
    preg_match_all('/url\(\s*(?:"([^"]*)"|\'([^\']*)\'|([^)\s]*))\s*\)/i', $text, $ms, PREG_SET_ORDER);
    foreach ($ms as $m) {
        $v = '';
        for ($i = 1; $i <= 3; $i++) {
            if (isset($m[$i]) && $m[$i] !== '') { $v = $m[$i]; break; }
        }
        $v = $dec($v);
        if ($v !== '') {
            $out[] = $v;
        }
    }
    return $out;
}

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
