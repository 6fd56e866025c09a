<?php
/*
 * Interop reader "horde-mime", PHP side: Horde_Mime (Debian php-horde-mime) parses the
 * message with Horde_Mime_Part::parseMessage; Horde_Mime_Related gives each
 * multipart/related's root (startId) and its own cid: lookup (cidReplace); Nextcloud
 * Mail's rules (re-stated from its lib/IMAP/ImapMessageFetcher.php, getPart, and
 * lib/Service/HtmlPurify/TransformURLScheme.php) decide which parts are attachments,
 * inline attachments or body. Prints one JSON object of nodes for reader.py, which
 * builds the reader contract's fields.
 *
 * Usage: php reader.php FILE.eml
 */
error_reporting(E_ALL & ~E_DEPRECATED & ~E_USER_DEPRECATED & ~E_NOTICE & ~E_WARNING);
ini_set('display_errors', 'stderr');

/* Horde's PEAR layout: Horde_Mime_Part is Horde/Mime/Part.php on the include path. */
spl_autoload_register(function ($class) {
    if (strncmp($class, 'Horde_', 6) === 0) {
        $file = stream_resolve_include_path(str_replace('_', '/', $class) . '.php');
        if ($file !== false) {
            require_once $file;
        }
    }
});
if (!class_exists('Horde_Mime_Part') || !class_exists('Horde_Mime_Related')) {
    fwrite(STDERR, "horde-mime reader: Horde_Mime not found (scripts/install-test-deps.d/horde-mime.sh)\n");
    exit(2);
}

$out = ['ok' => true, 'error' => null, 'nodes' => [], 'defects' => [], 'related' => [],
        'cidreplace' => [], 'nextcloud' => null];

function utf8($s)
{
    if ($s === null || $s === false) {
        return null;
    }
    $s = (string)$s;
    return mb_check_encoding($s, 'UTF-8') ? $s : mb_convert_encoding($s, 'UTF-8', 'ISO-8859-1');
}

function child_path($parent, $i)
{
    return $parent === '0' ? (string)$i : $parent . '.' . $i;
}

try {
    $raw = file_get_contents($argv[1]);
    if ($raw === false) {
        fwrite(STDERR, "horde-mime reader: cannot read $argv[1]\n");
        exit(2);
    }
    /* Nextcloud Mail reads the structure from the IMAP server, which treats every
     * message as MIME; its own parseMessage calls pass forcemime. */
    $msg = Horde_Mime_Part::parseMessage($raw, ['forcemime' => true]);

    $nodes = [];      // path => node array
    $parts = [];      // path => Horde_Mime_Part
    $byMimeId = [];   // Horde MIME id => path

    $walk = function (Horde_Mime_Part $p, $path, $parent) use (&$walk, &$nodes, &$parts, &$byMimeId, $raw, &$out) {
        $loc = null;
        try {
            $hdr = Horde_Mime_Part::getRawPartText($raw, 'header', $path);
            $h = Horde_Mime_Headers::parseHeaders($hdr);
            $v = $h->getValue('Content-Location');
            $loc = ($v === null) ? null : $v;
        } catch (Throwable $e) {   // Horde's own code may throw an Error here
            $out['defects'][] = "$path: Content-Location not read: getRawPartText: " . $e->getMessage();
        }
        $n = [
            'path' => $path, 'parent' => $parent, 'mime_id' => $p->getMimeId(),
            'content_type' => $p->getType(),
            'content_id' => utf8($p->getContentId()),
            'content_location' => utf8($loc),
            'type' => utf8($p->getContentTypeParameter('type')),
            'start' => utf8($p->getContentTypeParameter('start')),
            'disposition' => utf8($p->getDisposition()),
            'name' => utf8($p->getName()),
            'html' => null,
        ];
        if ($p->getType() === 'message/external-body') {
            $n['url'] = utf8($p->getContentTypeParameter('url'));
            $n['access_type'] = utf8($p->getContentTypeParameter('access-type'));
        } elseif ($p->getPrimaryType() === 'message' && $p->getType() !== 'message/external-body') {
            /* parseMessage parses a message/rfc822 part into one child, the embedded
             * message, without undoing a Content-Transfer-Encoding: an encoded one gives a
             * child with nothing in it. */
            $kids = $p->getParts();
            $k = $kids ? reset($kids) : null;
            $n['opens'] = ($k !== null && ($k->getParts() || strlen(trim((string)$k->getContents())) > 0))
                ? 'message' : 'empty';
        } elseif ($p->getType() === 'application/octet-stream') {
            $n['opens'] = strlen(trim((string)$p->getContents())) > 0 ? 'file' : 'empty';
        } elseif ($p->getType() === 'text/html') {
            $c = $p->getContents();
            $cs = $p->getCharset() ?: 'us-ascii';
            $conv = @Horde_String::convertCharset((string)$c, $cs, 'UTF-8');
            if (!is_string($conv) || !mb_check_encoding($conv, 'UTF-8')) {
                $out['defects'][] = "$path: charset $cs not converted";
                $conv = mb_convert_encoding((string)$c, 'UTF-8', 'UTF-8');
            }
            $n['html'] = $conv;
        }
        $nodes[$path] = $n;
        $parts[$path] = $p;
        if ($p->getMimeId() !== null) {
            $byMimeId[$p->getMimeId()] = $path;
        }
        // message/rfc822 is a leaf here, as in the other library readers.
        if ($p->getPrimaryType() === 'multipart') {
            $i = 1;
            foreach ($p->getParts() as $k) {
                $walk($k, child_path($path, $i++), $path);
            }
        }
    };
    $walk($msg, '0', null);

    /* Horde_Mime_Related: root and cidReplace, for every multipart/related. */
    foreach ($parts as $path => $p) {
        $path = (string)$path;   // PHP made "2" an integer key
        if ($p->getType() !== 'multipart/related') {
            continue;
        }
        $rel = new Horde_Mime_Related($p);
        $start = $rel->startId();
        $out['related'][] = ['part' => $path, 'root_mime_id' => $start,
                             'root' => ($start !== null && isset($byMimeId[$start])) ? (string)$byMimeId[$start] : null];
        foreach ($parts as $hp => $hpart) {
            $hp = (string)$hp;
            // only the HTML parts inside this multipart/related
            if ($nodes[$hp]['html'] === null || !($path === '0' || strpos($hp, $path . '.') === 0)) {
                continue;
            }
            $rel->cidReplace($nodes[$hp]['html'], function ($id, $attribute, $node) use (&$out, $hp, $path, $byMimeId) {
                $out['cidreplace'][] = ['from' => $hp, 'related' => $path,
                                        'ref' => $node->getAttribute($attribute),
                                        'attr' => strtolower($node->tagName) . '@' . $attribute,
                                        'to' => isset($byMimeId[$id]) ? (string)$byMimeId[$id] : null];
                return 'replaced';
            }, 'UTF-8');
        }
    }

    /* Nextcloud Mail: ImapMessageFetcher::getPart, applied to Horde's parts. */
    $nc = ['attachments' => [], 'inline' => [], 'html' => [], 'plain' => [], 'other' => []];
    $ignore = ['signature.asc', 'smime.p7s'];
    $getPart = function ($path) use (&$getPart, &$nc, $parts, $ignore) {
        $p = $parts[$path];
        if ($p->getType() === 'text/calendar') {
            if ($p->getName() !== null) {
                $nc['attachments'][] = $path;
            }
            $params = $p->getAllContentTypeParameters();
            if (!isset($params['method'])) {
                return;
            }
            if (in_array(strtoupper($params['method']), ['REQUEST', 'REPLY', 'CANCEL'])) {
                $nc['other'][] = $path;
                return;
            }
        }
        $isAttachment = ($p->isAttachment() || $p->getType() === 'message/rfc822')
            && !in_array($p->getType(), ['application/pgp-signature', 'application/pkcs7-signature', 'application/x-pkcs7-signature']);
        if ($isAttachment) {
            $nc['attachments'][] = $path;
            return;
        }
        $filename = $p->getName();
        $primary = $p->getPrimaryType();
        $hasContentId = $p->getContentId() !== null && !in_array($primary, ['text', 'multipart'], true);
        if ($hasContentId || isset($filename) || $p->getType() === 'message/rfc822') {
            if (in_array($filename, $ignore)) {
                return;
            }
            $nc['inline'][] = $path;
            return;
        }
        if ($primary === 'multipart') {
            $i = 1;
            foreach ($p->getParts() as $k) {
                $getPart(child_path($path, $i++));
            }
            return;
        }
        if ($p->getType() === 'text/plain') {
            $nc['plain'][] = $path;
            return;
        }
        if ($p->getType() === 'text/html') {
            $nc['html'][] = $path;
            return;
        }
        if ($p->getPrimaryType() === 'message') {
            $nc['plain'][] = $path;
        }
    };
    if ($msg->getPrimaryType() === 'multipart') {
        $i = 1;
        foreach ($msg->getParts() as $k) {
            $getPart(child_path('0', $i++));
        }
    } else {
        $body = $msg->findBody();
        if ($body !== null) {
            $getPart('0');   // a single part: findBody() names the message itself
        }
    }
    $out['nextcloud'] = $nc;
    $out['nodes'] = array_values($nodes);
} catch (Throwable $e) {
    $out['ok'] = false;
    $out['error'] = get_class($e) . ': ' . $e->getMessage();
}
echo json_encode($out, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE), "\n";
