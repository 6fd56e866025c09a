// Interop reader "mime4j": Apache James mime4j (Debian libapache-mime4j-java) parses the
// message (DOM API, DefaultMessageBuilder, configured as Thunderbird for Android's
// MimeMessage.parse configures its stream parser), and Thunderbird for Android's rules,
// re-stated here from that app's source, decide what a person sees:
//
//  - viewable vs attachment: MessageExtractor.findViewablesAndAttachments (multipart/
//    alternative: first text/plain and first text/html, the rest attachments;
//    multipart/signed: first child only; text/plain and text/html are the body unless
//    disposition "attachment" or a filename parameter; application/pgp-signature and
//    text/rfc822-headers are ignored; everything else is an attachment),
//  - attachment list: AttachmentInfoExtractor hides an attachment ("inlineAttachment")
//    only when its Content-Disposition type is exactly "inline" (case-insensitive), it
//    has a Content-ID field and an image/* type; the message view lists the others,
//  - images: AttachmentResolver maps Content-ID (the text between the first '<' and the
//    last '>' of the first Content-ID field, else the whole value) to the part, for
//    every non-multipart part of the message, walked with a stack (children pushed in
//    order) and HashMap.put, so the first such part in document order wins; the web
//    view asks it for the cid: URL's scheme-specific part (percent-decoded); the HTML
//    sanitizer (jsoup Safelist) keeps img src only for http, https, cid and data, and
//    background on body/table/tr/th/td; remote images are blocked by default.
//
// Output: one JSON object, the reader contract of tests/interop/README.md.
// Usage: java -cp <classes>:<mime4j jars> Mime4jReader FILE.eml [VERSION]
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.Reader;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.Collections;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.james.mime4j.codec.DecodeMonitor;
import org.apache.james.mime4j.dom.Body;
import org.apache.james.mime4j.dom.Entity;
import org.apache.james.mime4j.dom.Header;
import org.apache.james.mime4j.dom.Message;
import org.apache.james.mime4j.dom.Multipart;
import org.apache.james.mime4j.dom.SingleBody;
import org.apache.james.mime4j.dom.TextBody;
import org.apache.james.mime4j.dom.field.ContentDispositionField;
import org.apache.james.mime4j.dom.field.ContentIdField;
import org.apache.james.mime4j.dom.field.ContentLocationField;
import org.apache.james.mime4j.dom.field.ContentTypeField;
import org.apache.james.mime4j.dom.field.ParsedField;
import org.apache.james.mime4j.io.EOLConvertingInputStream;
import org.apache.james.mime4j.message.DefaultMessageBuilder;
import org.apache.james.mime4j.stream.Field;
import org.apache.james.mime4j.stream.MimeConfig;

public final class Mime4jReader {
    static final Pattern ATTR = Pattern.compile(
            "\\b(?:src|href|background)\\s*=\\s*(?:\"([^\"]*)\"|'([^']*)'|([^\\s>\"']+))",
            Pattern.CASE_INSENSITIVE);
    static final Pattern CSSURL = Pattern.compile(
            "url\\(\\s*(?:\"([^\"]*)\"|'([^']*)'|([^)\\s]*))\\s*\\)", Pattern.CASE_INSENSITIVE);
    static final Pattern TAG = Pattern.compile("<([A-Za-z][A-Za-z0-9]*)(\\s[^>]*)?>");
    static final Pattern ONE_ATTR = Pattern.compile(
            "([^\\s=/>\"']+)(?:\\s*=\\s*(?:\"([^\"]*)\"|'([^']*)'|([^\\s>\"']+)))?");
    static final Pattern SCHEME = Pattern.compile("^[A-Za-z][A-Za-z0-9+.-]*:");
    static final Set<String> BACKGROUND_TAGS = Set.of("body", "table", "tr", "th", "td");

    /** One entity of the tree, in document order. */
    static final class Node {
        String path;
        Node parent;
        Entity entity;
        String ctype;
        String cid;          // mime4j's ContentIdField.getId()
        String location;     // mime4j's ContentLocationField.getLocation()
        String resolved;
        String html;         // decoded text of a text/html part
        List<Node> kids = new ArrayList<>();
    }

    static final List<Node> nodes = new ArrayList<>();
    static final List<String> defects = new ArrayList<>();
    static final Map<Entity, Node> byEntity = new IdentityHashMap<>();

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("mime4j reader: usage: Mime4jReader FILE.eml [VERSION]");
            System.exit(2);
        }
        String version = "Apache James mime4j " + (args.length > 1 ? args[1] : "?")
                + " (DOM API), Thunderbird for Android 22.0 rules";
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("reader", "mime4j");
        out.put("version", version);
        out.put("ok", true);
        out.put("error", null);
        List<Object> extbody = new ArrayList<>();
        List<Object> parts = new ArrayList<>();
        List<Object> related = new ArrayList<>();
        List<Object> refs = new ArrayList<>();
        List<Object> images = new ArrayList<>();
        out.put("extbody", extbody);
        out.put("parts", parts);
        out.put("related", related);
        out.put("refs", refs);
        out.put("images", images);
        out.put("defects", defects);
        byte[] raw;
        try (InputStream in = new FileInputStream(args[0])) {
            raw = in.readAllBytes();
        }
        try {
            MimeConfig config = new MimeConfig.Builder()
                    .setMaxHeaderLen(-1).setMaxLineLen(-1).setMaxHeaderCount(-1).build();
            DefaultMessageBuilder builder = new DefaultMessageBuilder();
            builder.setMimeEntityConfig(config);
            builder.setDecodeMonitor(new DecodeMonitor() {
                @Override
                public boolean warn(String message, String action) {
                    defects.add(message + (action != null ? " (" + action + ")" : ""));
                    return false;
                }

                @Override
                public boolean isListening() {
                    return true;
                }
            });
            Message msg = builder.parseMessage(new EOLConvertingInputStream(
                    new java.io.ByteArrayInputStream(raw)));
            walk(msg, "0", null);
            tfaRules(parts, images);
            contractFields(extbody, related, refs);
        } catch (Exception | StackOverflowError e) {
            out.put("ok", false);
            out.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        StringBuilder sb = new StringBuilder();
        json(sb, out);
        sb.append('\n');
        System.out.write(sb.toString().getBytes(StandardCharsets.UTF_8));
        System.out.flush();
    }

    // ------------------------------------------------------------------ the tree

    static void walk(Entity e, String path, Node parent) {
        Node n = new Node();
        n.path = path;
        n.parent = parent;
        n.entity = e;
        n.ctype = e.getMimeType();
        Header h = e.getHeader();
        if (h != null) {
            for (Field f : h.getFields()) {
                if (f instanceof ParsedField && !((ParsedField) f).isValidField()) {
                    ParsedField pf = (ParsedField) f;
                    defects.add(path + ": " + f.getName() + ": "
                            + (pf.getParseException() != null ? pf.getParseException().getMessage() : "invalid field"));
                }
            }
            Field f = h.getField("Content-ID");
            if (f instanceof ContentIdField) {
                n.cid = ((ContentIdField) f).getId();
            } else if (f != null) {
                n.cid = f.getBody();
            }
            f = h.getField("Content-Location");
            if (f instanceof ContentLocationField) {
                n.location = ((ContentLocationField) f).getLocation();
            } else if (f != null) {
                n.location = f.getBody();
            }
        }
        nodes.add(n);
        byEntity.put(e, n);
        if (parent != null) {
            parent.kids.add(n);
        }
        Body b = e.getBody();
        if ("text/html".equals(n.ctype) && b instanceof TextBody) {
            try (Reader r = ((TextBody) b).getReader()) {
                StringBuilder sb = new StringBuilder();
                char[] buf = new char[8192];
                int k;
                while ((k = r.read(buf)) > 0) {
                    sb.append(buf, 0, k);
                }
                n.html = sb.toString();
            } catch (Exception ex) {
                defects.add(path + ": text/html body: " + ex);
            }
        }
        // message/rfc822 is a leaf here, as in the other library readers.
        if (b instanceof Multipart) {
            int i = 1;
            for (Entity k : ((Multipart) b).getBodyParts()) {
                walk(k, "0".equals(path) ? String.valueOf(i) : path + "." + i, n);
                i++;
            }
        }
    }

    // ------------------------------------------------------- Thunderbird for Android

    /** K-9's MimeHeader value: the raw field after its colon, trimmed (folding kept). */
    static String tfaFirstHeader(Entity e, String name) {
        Header h = e.getHeader();
        if (h == null) {
            return null;
        }
        for (Field f : h.getFields()) {
            if (f.getName().equalsIgnoreCase(name)) {
                String raw = f.getRaw() != null
                        ? new String(toBytes(f.getRaw()), StandardCharsets.ISO_8859_1)
                        : f.getName() + ": " + f.getBody();
                int colon = raw.indexOf(':');
                return colon == raw.length() - 1 ? "" : raw.substring(colon + 1).trim();
            }
        }
        return null;
    }

    static byte[] toBytes(org.apache.james.mime4j.util.ByteSequence s) {
        return s.toByteArray();
    }

    /** MimeBodyPart.getContentId: between the first '<' and the last '>', else all. */
    static String tfaContentId(Node n) {
        if (n.parent == null) {
            return null; // MimeMessage.getContentId() is null for the message itself
        }
        String v = tfaFirstHeader(n.entity, "Content-ID");
        if (v == null) {
            return null;
        }
        int first = v.indexOf('<');
        int last = v.lastIndexOf('>');
        return (first != -1 && last != -1) ? v.substring(first + 1, last) : v;
    }

    /** MimeUtility.getHeaderParameter(value, null): the value before any ';', trimmed. */
    static String headerValue(String v) {
        if (v == null) {
            return null;
        }
        int semi = v.indexOf(';');
        return (semi >= 0 ? v.substring(0, semi) : v).trim();
    }

    static boolean hasFilenameParam(Entity e) {
        Header h = e.getHeader();
        Field f = h == null ? null : h.getField("Content-Disposition");
        if (!(f instanceof ContentDispositionField)) {
            return false;
        }
        for (String k : ((ContentDispositionField) f).getParameters().keySet()) {
            if (k.toLowerCase(Locale.ROOT).matches("filename(\\*.*)?")) {
                return true;
            }
        }
        return false;
    }

    /** MessageExtractor.isPartTextualBody. */
    static boolean isTextualBody(Node n) {
        String disp = tfaFirstHeader(n.entity, "Content-Disposition");
        boolean attachment = disp != null
                && ("attachment".equalsIgnoreCase(headerValue(disp)) || hasFilenameParam(n.entity));
        return !attachment && ("text/html".equals(n.ctype) || "text/plain".equals(n.ctype)
                || "application/pgp".equals(n.ctype));
    }

    static boolean isMultipart(Node n) {
        return n.entity.getBody() instanceof Multipart;
    }

    static final List<Node> viewables = new ArrayList<>();   // Text and Html parts shown
    static final List<Node> attachmentParts = new ArrayList<>();

    /** MessageExtractor.findViewablesAndAttachments. */
    static void findViewablesAndAttachments(Node n) {
        if (isMultipart(n)) {
            if ("multipart/alternative".equals(n.ctype)) {
                List<Node> text = findTextPart(n, true);
                Set<Node> known = Collections.newSetFromMap(new IdentityHashMap<>());
                known.addAll(text);
                List<Node> html = findHtmlPart(n, known, true);
                viewables.addAll(text);
                viewables.addAll(html);
            } else if ("multipart/signed".equals(n.ctype)) {
                if (!n.kids.isEmpty()) {
                    findViewablesAndAttachments(n.kids.get(0));
                }
            } else {
                for (Node k : n.kids) {
                    findViewablesAndAttachments(k);
                }
            }
        } else if (n.entity.getBody() instanceof Message
                && !"attachment".equalsIgnoreCase(headerValue(tfaFirstHeader(n.entity, "Content-Disposition")))) {
            viewables.add(n); // a message header block, then its own parts (not in this tree)
        } else if (isTextualBody(n)) {
            viewables.add(n);
        } else if ("application/pgp-signature".equals(n.ctype) || "text/rfc822-headers".equals(n.ctype)) {
            // ignored explicitly
        } else {
            attachmentParts.add(n);
        }
    }

    static List<Node> findTextPart(Node mp, boolean directChild) {
        List<Node> out = new ArrayList<>();
        for (Node k : mp.kids) {
            if (isMultipart(k)) {
                List<Node> t = findTextPart(k, false);
                if (!t.isEmpty()) {
                    out.addAll(t);
                    if (directChild) {
                        break;
                    }
                }
            } else if (isTextualBody(k) && "text/plain".equals(k.ctype)) {
                out.add(k);
                if (directChild) {
                    break;
                }
            }
        }
        return out;
    }

    static List<Node> findHtmlPart(Node mp, Set<Node> known, boolean directChild) {
        List<Node> out = new ArrayList<>();
        boolean found = false;
        for (Node k : mp.kids) {
            if (isMultipart(k)) {
                if (directChild && found) {
                    findAttachments(k, known);
                } else {
                    List<Node> h = findHtmlPart(k, known, false);
                    if (!h.isEmpty()) {
                        found = true;
                        out.addAll(h);
                    }
                }
            } else if (!(directChild && found) && isTextualBody(k) && "text/html".equals(k.ctype)) {
                out.add(k);
                found = true;
            } else if (!known.contains(k)) {
                attachmentParts.add(k);
            }
        }
        return out;
    }

    static void findAttachments(Node mp, Set<Node> known) {
        for (Node k : mp.kids) {
            if (isMultipart(k)) {
                findAttachments(k, known);
            } else if (!known.contains(k)) {
                attachmentParts.add(k);
            }
        }
    }

    /** AttachmentInfoExtractor: "inline" + Content-ID field + image/* = not listed. */
    static boolean inlineAttachment(Node n) {
        String disp = tfaFirstHeader(n.entity, "Content-Disposition");
        return disp != null && headerValue(disp).matches("^(?i:inline)")
                && tfaFirstHeader(n.entity, "Content-ID") != null
                && n.ctype != null && n.ctype.toLowerCase(Locale.ROOT).startsWith("image/");
    }

    /** AttachmentResolver.buildCidToAttachmentUriMap: a stack, HashMap.put. */
    static Map<String, Node> cidMap(Node root) {
        Map<String, Node> result = new HashMap<>();
        Deque<Node> stack = new ArrayDeque<>();
        stack.push(root);
        while (!stack.isEmpty()) {
            Node n = stack.pop();
            if (isMultipart(n)) {
                for (Node k : n.kids) {
                    stack.push(k);
                }
            } else {
                String cid = tfaContentId(n);
                if (cid != null) {
                    result.put(cid, n);
                }
            }
        }
        return result;
    }

    /** android.net.Uri: the scheme-specific part (before '#'), percent-decoded. */
    static String schemeSpecificPart(String url) {
        String ssp = url.substring(url.indexOf(':') + 1);
        int hash = ssp.indexOf('#');
        if (hash >= 0) {
            ssp = ssp.substring(0, hash);
        }
        return pctDecode(ssp);
    }

    static String pctDecode(String s) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        byte[] in = s.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < in.length; i++) {
            if (in[i] == '%' && i + 2 < in.length && hex(in[i + 1]) >= 0 && hex(in[i + 2]) >= 0) {
                b.write(hex(in[i + 1]) * 16 + hex(in[i + 2]));
                i += 2;
            } else {
                b.write(in[i]);
            }
        }
        return new String(b.toByteArray(), StandardCharsets.UTF_8);
    }

    static int hex(byte c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    static String decodeEntities(String v) {
        return v.replace("&quot;", "\"").replace("&#39;", "'").replace("&lt;", "<")
                .replace("&gt;", ">").replace("&amp;", "&").trim();
    }

    static String group(Matcher m) {
        for (int i = 1; i <= m.groupCount(); i++) {
            if (m.group(i) != null) {
                return m.group(i);
            }
        }
        return null;
    }

    /** The image references of one HTML body in document order: [kind, value]. */
    static List<String[]> imageRefs(String html) {
        List<String[]> out = new ArrayList<>();
        Matcher t = TAG.matcher(html);
        int pos = 0;
        while (t.find()) {
            cssUrls(html.substring(pos, t.start()), out); // <style> text and other text
            pos = t.end();
            String tag = t.group(1).toLowerCase(Locale.ROOT);
            String attrs = t.group(2) == null ? "" : t.group(2);
            Matcher a = ONE_ATTR.matcher(attrs);
            while (a.find()) {
                String name = a.group(1).toLowerCase(Locale.ROOT);
                String v = null;
                for (int i = 2; i <= 4; i++) {
                    if (a.group(i) != null) {
                        v = a.group(i);
                    }
                }
                if (v == null) {
                    continue;
                }
                v = decodeEntities(v);
                if (name.equals("src") && tag.equals("img") && !v.isEmpty()) {
                    out.add(new String[] {"img", v});
                } else if (name.equals("background") && !v.isEmpty()) {
                    out.add(new String[] {BACKGROUND_TAGS.contains(tag) ? "background" : "background-dropped", v});
                } else if (name.equals("style")) {
                    cssUrls(v, out);
                }
            }
        }
        cssUrls(html.substring(pos), out);
        return out;
    }

    static void cssUrls(String text, List<String[]> out) {
        Matcher m = CSSURL.matcher(text);
        while (m.find()) {
            String v = decodeEntities(group(m));
            if (!v.isEmpty()) {
                out.add(new String[] {"css", v});
            }
        }
    }

    static void tfaRules(List<Object> parts, List<Object> images) {
        Node root = nodes.get(0);
        findViewablesAndAttachments(root);
        Set<Node> listed = Collections.newSetFromMap(new IdentityHashMap<>());
        Set<Node> hidden = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Node n : attachmentParts) {
            (inlineAttachment(n) ? hidden : listed).add(n);
        }
        Map<String, Node> cids = cidMap(root);
        for (Node n : viewables) {
            if (!"text/html".equals(n.ctype) || n.html == null) {
                continue;
            }
            for (String[] r : imageRefs(n.html)) {
                String ref = r[1];
                Node to = null;
                String why;
                String scheme = ref.contains(":") && SCHEME.matcher(ref).find()
                        ? ref.substring(0, ref.indexOf(':')).toLowerCase(Locale.ROOT) : "";
                if (r[0].equals("background-dropped")) {
                    why = "attribute removed by the sanitizer";
                } else if (scheme.equals("cid")) {
                    to = cids.get(schemeSpecificPart(ref));
                    why = to != null ? "AttachmentResolver" : "no part with that Content-ID";
                } else if (r[0].equals("img") && !(scheme.equals("http") || scheme.equals("https")
                        || scheme.equals("data"))) {
                    why = "src removed by the sanitizer (scheme not http/https/cid/data)";
                } else if (scheme.equals("http") || scheme.equals("https")) {
                    why = "remote image, blocked by default";
                } else if (scheme.equals("data")) {
                    why = "data: URL, not a part";
                } else {
                    why = "not resolved (no base URL)";
                }
                Map<String, Object> im = new LinkedHashMap<>();
                im.put("from", n.path);
                im.put("ref", ref);
                im.put("to", to == null ? null : to.path);
                im.put("how", why);
                images.add(im);
            }
        }
        // parts: library values, the contract's resolved, and what the app does with it.
        for (Node n : nodes) {
            n.resolved = null;
            if (n.location != null) {
                n.resolved = join(baseOf(n), n.location.strip());
            }
            Map<String, Object> p = new LinkedHashMap<>();
            p.put("part", n.path);
            p.put("content_type", n.ctype);
            p.put("content_id", n.cid);
            p.put("content_location", n.location);
            p.put("resolved", n.resolved);
            if (!isMultipart(n)) {
                // AttachmentInfoExtractor names every attachment part, listed or hidden
                p.put("name", listed.contains(n) || hidden.contains(n) ? tfaName(n) : null);
                String o = tfaOpens(n);
                if (o != null) {
                    p.put("opens", o);
                }
                p.put("attachment", listed.contains(n));
                p.put("appended", false);
                p.put("tfa_content_id", tfaContentId(n));
                p.put("tfa_role", listed.contains(n) ? "attachment"
                        : hidden.contains(n) ? "inline attachment (hidden)"
                        : viewables.contains(n) ? "body" : "ignored");
            }
            parts.add(p);
        }
    }

    // ------------------------------------------------------- names, forwarded messages

    /**
     * AttachmentInfoExtractor.extractAttachmentInfo: MimeUtility.getHeaderParameter of
     * the disposition's "filename", else the type's "name", else "noname" plus the
     * extension MimeTypeUtil knows for the type. The header bodies are K-9's
     * (MimeBodyPart.getDisposition/getContentType: the first field, CR and LF removed).
     */
    static String tfaName(Node n) {
        String disp = unfold(tfaFirstHeader(n.entity, "Content-Disposition"));
        String ct = unfold(tfaFirstHeader(n.entity, "Content-Type"));
        String name = disp == null ? null : tfaParameters(disp).get("filename");
        if (name == null && ct != null) {
            name = tfaParameters(ct).get("name");
        }
        if (name == null) {
            String ext = EXTENSIONS.get(n.ctype == null ? "" : n.ctype.toLowerCase(Locale.ROOT));
            name = "noname" + (ext != null ? "." + ext : "");
        }
        return name;
    }

    /** A few of MimeTypeUtil's extensions, for the "noname" fallback. */
    static final Map<String, String> EXTENSIONS = Map.of(
            "application/pdf", "pdf", "image/png", "png", "image/gif", "gif", "image/jpeg", "jpg",
            "text/plain", "txt", "text/html", "html", "message/rfc822", "eml",
            "text/csv", "csv");

    static String unfold(String s) {
        return s == null ? null : s.replace("\r", "").replace("\n", "");
    }

    /**
     * MimeParameterDecoder.decode, re-stated: parameters (token or quoted string) until
     * the first parse error; a name given twice is dropped; RFC 2231 sections (name*,
     * name*0, name*0*, name*1*, ...) are combined and decoded in their charset when the
     * sections are complete, and win over a plain parameter of the same name; a plain
     * value is RFC 2047 decoded (DecoderUtil.decodeEncodedWords).
     */
    static Map<String, String> tfaParameters(String body) {
        Map<String, String[]> basic = new LinkedHashMap<>();   // name -> {value, wasToken}
        Set<String> dup = new java.util.HashSet<>();
        int i = body.indexOf(';');
        while (i >= 0 && i < body.length()) {
            int[] pos = {i + 1};
            skipWs(body, pos);
            String name = readToken(body, pos).toLowerCase(Locale.ROOT);
            skipWs(body, pos);
            if (name.isEmpty() || pos[0] >= body.length() || body.charAt(pos[0]) != '=') {
                break;
            }
            pos[0]++;
            skipWs(body, pos);
            String value;
            boolean token;
            if (pos[0] < body.length() && body.charAt(pos[0]) == '"') {
                value = readQuoted(body, pos);
                token = false;
                if (value == null) {
                    break;
                }
            } else {
                value = readToken(body, pos);
                token = true;
            }
            if (basic.remove(name) != null || dup.contains(name)) {
                dup.add(name);
            } else {
                basic.put(name, new String[] {value, token ? "t" : "q"});
            }
            skipWs(body, pos);
            if (pos[0] >= body.length()) {
                break;
            }
            if (body.charAt(pos[0]) != ';') {
                break;
            }
            i = pos[0];
        }
        Map<String, java.util.TreeMap<Integer, String[]>> sections = new LinkedHashMap<>();
        Map<String, String> single = new LinkedHashMap<>();
        for (Map.Entry<String, String[]> e : basic.entrySet()) {
            String pn = e.getKey();
            boolean ext = pn.endsWith("*");
            String[] bits = pn.split("\\*", -1);
            boolean section = !(ext && !"t".equals(e.getValue()[1]))
                    && (bits.length == 2 || (bits.length == 3 && bits[2].isEmpty()))
                    && (bits.length == 2 && ext || bits[1].matches("0|[1-9][0-9]*"));
            if (!section) {
                single.put(pn, e.getValue()[0]);
                continue;
            }
            int idx = bits.length == 2 && ext ? -1 : Integer.parseInt(bits[1]);
            sections.computeIfAbsent(bits[0], k -> new java.util.TreeMap<>())
                    .put(idx, new String[] {e.getValue()[0], ext ? "*" : ""});
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, java.util.TreeMap<Integer, String[]>> e : sections.entrySet()) {
            String v = combine(e.getValue());
            if (v != null) {
                out.put(e.getKey(), v);
            }
        }
        for (Map.Entry<String, String> e : single.entrySet()) {
            out.putIfAbsent(e.getKey(), decodeEncodedWords(e.getValue()));
        }
        return out;
    }

    /** The sections of one RFC 2231 parameter joined, or null when they are not 0..n. */
    static String combine(java.util.TreeMap<Integer, String[]> secs) {
        List<Integer> idx = new ArrayList<>(secs.keySet());
        if (!(idx.size() == 1 && idx.get(0) <= 0)) {
            for (int k = 0; k < idx.size(); k++) {
                if (idx.get(k) != k) {
                    return null;
                }
            }
        }
        String[] first = secs.firstEntry().getValue();
        java.nio.charset.Charset cs = null;
        String firstData = first[0];
        if ("*".equals(first[1])) {
            int q1 = firstData.indexOf('\''), q2 = q1 < 0 ? -1 : firstData.indexOf('\'', q1 + 1);
            if (q2 < 0) {
                return null;
            }
            try {
                cs = java.nio.charset.Charset.forName(firstData.substring(0, q1));
            } catch (Exception ex) {
                cs = null;
            }
            firstData = firstData.substring(q2 + 1);
            if (cs == null) {
                first = new String[] {firstData, ""};   // an unknown charset: kept as text
            }
        }
        StringBuilder sb = new StringBuilder();
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        boolean firstOne = true;
        for (String[] sec : secs.values()) {
            String data = firstOne ? firstData : sec[0];
            boolean extended = firstOne ? cs != null : "*".equals(sec[1]);
            firstOne = false;
            if (extended && cs != null) {
                byte[] d = pctBytes(data);
                buf.write(d, 0, d.length);
            } else if (extended) {
                return null;   // extended sections after a plain first one
            } else {
                if (cs != null) {
                    sb.append(new String(buf.toByteArray(), cs));
                    buf.reset();
                }
                sb.append(data);
            }
        }
        if (cs != null) {
            sb.append(new String(buf.toByteArray(), cs));
        }
        return sb.toString();
    }

    static byte[] pctBytes(String s) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        byte[] in = s.getBytes(StandardCharsets.ISO_8859_1);
        for (int i = 0; i < in.length; i++) {
            if (in[i] == '%' && i + 2 < in.length && hex(in[i + 1]) >= 0 && hex(in[i + 2]) >= 0) {
                b.write(hex(in[i + 1]) * 16 + hex(in[i + 2]));
                i += 2;
            } else {
                b.write(in[i]);
            }
        }
        return b.toByteArray();
    }

    static void skipWs(String s, int[] pos) {
        while (pos[0] < s.length() && Character.isWhitespace(s.charAt(pos[0]))) {
            pos[0]++;
        }
    }

    static String readToken(String s, int[] pos) {
        int start = pos[0];
        while (pos[0] < s.length()) {
            char c = s.charAt(pos[0]);
            if (c <= ' ' || c == 127 || "()<>@,;:\\\"/[]?=".indexOf(c) >= 0) {
                break;
            }
            pos[0]++;
        }
        return s.substring(start, pos[0]);
    }

    static String readQuoted(String s, int[] pos) {
        StringBuilder sb = new StringBuilder();
        pos[0]++;
        while (pos[0] < s.length()) {
            char c = s.charAt(pos[0]++);
            if (c == '"') {
                return sb.toString();
            }
            if (c == '\\' && pos[0] < s.length()) {
                c = s.charAt(pos[0]++);
            }
            sb.append(c);
        }
        return null;   // unterminated: a parse error
    }

    static final Pattern ENCODED_WORD = Pattern.compile("=\\?([^?]+)\\?([bBqQ])\\?([^?]*)\\?=");

    /** DecoderUtil.decodeEncodedWords: encoded-words decoded, the space between two dropped. */
    static String decodeEncodedWords(String s) {
        Matcher m = ENCODED_WORD.matcher(s);
        StringBuilder out = new StringBuilder();
        int last = 0;
        boolean prevWord = false;
        while (m.find()) {
            String between = s.substring(last, m.start());
            if (!(prevWord && between.trim().isEmpty())) {
                out.append(between);
            }
            String dec = decodeWord(m.group(1), m.group(2), m.group(3));
            if (dec == null) {
                out.append(m.group());
                prevWord = false;
            } else {
                out.append(dec);
                prevWord = true;
            }
            last = m.end();
        }
        out.append(s.substring(last));
        return out.toString();
    }

    static String decodeWord(String charset, String enc, String text) {
        try {
            java.nio.charset.Charset cs = java.nio.charset.Charset.forName(charset.replaceAll("\\*.*$", ""));
            byte[] data;
            if (enc.equalsIgnoreCase("b")) {
                data = java.util.Base64.getMimeDecoder().decode(text);
            } else {
                data = pctBytes(text.replace('_', ' ').replace('=', '%'));
            }
            return new String(data, cs);
        } catch (Exception e) {
            return null;
        }
    }

    /**
     * What Thunderbird for Android offers of a message/rfc822 part: mime4j's DOM (which
     * K-9's own parser follows) parses it as a nested message, undoing a base64 or
     * quoted-printable Content-Transfer-Encoding first; an application/octet-stream part
     * is a file, its content decoded (MimeUtility.decodeBody).
     */
    static String tfaOpens(Node n) {
        Body b = n.entity.getBody();
        if (b instanceof Message) {
            Header h = ((Message) b).getHeader();
            if (h != null && !h.getFields().isEmpty()) {
                return "message";
            }
            return bodyBytes(((Message) b).getBody()).length == 0 ? "empty" : "undecodable";
        }
        String ct = n.ctype == null ? "" : n.ctype.toLowerCase(Locale.ROOT);
        if (ct.equals("application/octet-stream") || ct.startsWith("message/")) {
            byte[] d = bodyBytes(b);
            return new String(d, StandardCharsets.ISO_8859_1).trim().isEmpty() ? "empty" : "file";
        }
        return null;
    }

    static byte[] bodyBytes(Body b) {
        if (!(b instanceof SingleBody)) {
            return new byte[0];
        }
        try (InputStream in = ((SingleBody) b).getInputStream()) {
            return in.readAllBytes();
        } catch (Exception e) {
            return new byte[0];
        }
    }

    // ------------------------------------------------------- the contract's rules

    static String baseOf(Node n) {
        for (Node p = n.parent; p != null; p = p.parent) {
            if (p.location != null && SCHEME.matcher(p.location.strip()).find()) {
                return p.resolved;
            }
        }
        return "thismessage:/";
    }

    /** java.net.URI.resolve; null when either does not parse. */
    static String join(String base, String rel) {
        if (base == null) {
            return null;
        }
        try {
            return new URI(base).resolve(new URI(rel)).toString();
        } catch (Exception e) {
            return null;
        }
    }

    /** As lib/readerlib.py: surrounding whitespace, then every leading/trailing '<' '>'. */
    static String stripAngle(String s) {
        return s.strip().replaceAll("^[<>]+|[<>]+$", "");
    }

    static void contractFields(List<Object> extbody, List<Object> related, List<Object> refs) {
        for (Node n : nodes) {
            Field f = n.entity.getHeader() == null ? null : n.entity.getHeader().getField("Content-Type");
            ContentTypeField ct = f instanceof ContentTypeField ? (ContentTypeField) f : null;
            if ("message/external-body".equals(n.ctype)) {
                Map<String, Object> x = new LinkedHashMap<>();
                x.put("part", n.path);
                x.put("access_type", ct == null ? null : ct.getParameter("access-type"));
                x.put("url", ct == null ? null : ct.getParameter("url"));
                extbody.add(x);
            }
            if ("multipart/related".equals(n.ctype)) {
                String root = n.kids.isEmpty() ? null : n.kids.get(0).path;
                String start = ct == null ? null : ct.getParameter("start");
                if (start != null && !start.isEmpty()) {
                    String s = stripAngle(start);
                    root = null;
                    for (Node k : n.kids) {
                        if (k.cid != null && stripAngle(k.cid).equals(s)) {
                            root = k.path;
                            break;
                        }
                    }
                }
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("part", n.path);
                r.put("type", ct == null ? null : ct.getParameter("type"));
                r.put("root", root);
                related.add(r);
            }
        }
        Map<String, String> cids = new HashMap<>();
        for (Node n : nodes) {
            if (n.cid != null) {
                cids.putIfAbsent(stripAngle(n.cid), n.path);
            }
        }
        for (Node n : nodes) {
            if (n.html == null) {
                continue;
            }
            List<String> found = new ArrayList<>();
            for (Pattern rx : new Pattern[] {ATTR, CSSURL}) {
                Matcher m = rx.matcher(n.html);
                while (m.find()) {
                    String v = decodeEntities(group(m));
                    if (!v.isEmpty()) {
                        found.add(v);
                    }
                }
            }
            for (String ref : found) {
                String to = null;
                if (ref.length() >= 4 && ref.substring(0, 4).equalsIgnoreCase("cid:")) {
                    String x = ref.substring(4);
                    to = cids.get(x);
                    if (to == null) {
                        to = cids.get(pctDecode(x));
                    }
                } else {
                    String target = join(n.resolved != null ? n.resolved : "thismessage:/", ref);
                    for (Node k : nodes) {
                        if (target != null && target.equals(k.resolved)) {
                            to = k.path;
                            break;
                        }
                    }
                }
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("from", n.path);
                r.put("ref", ref);
                r.put("to", to);
                refs.add(r);
            }
        }
    }

    // ------------------------------------------------------------------ JSON

    @SuppressWarnings("unchecked")
    static void json(StringBuilder sb, Object o) {
        if (o == null) {
            sb.append("null");
        } else if (o instanceof Boolean || o instanceof Number) {
            sb.append(o);
        } else if (o instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) o).entrySet()) {
                if (!first) sb.append(", ");
                first = false;
                json(sb, e.getKey());
                sb.append(": ");
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (o instanceof List) {
            sb.append('[');
            boolean first = true;
            for (Object x : (List<Object>) o) {
                if (!first) sb.append(", ");
                first = false;
                json(sb, x);
            }
            sb.append(']');
        } else {
            String s = o.toString();
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"': sb.append("\\\""); break;
                    case '\\': sb.append("\\\\"); break;
                    case '\n': sb.append("\\n"); break;
                    case '\r': sb.append("\\r"); break;
                    case '\t': sb.append("\\t"); break;
                    default:
                        if (c < 0x20 || Character.isSurrogate(c) && !validSurrogate(s, i)) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                }
            }
            sb.append('"');
        }
    }

    static boolean validSurrogate(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        }
        return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
    }
}
