//! Command line: `serve` (the default), `config-check`, `config-dump` (the writing is
//! `config/dump.rs`), and the offline tools `check`, `fix`, `survey` (`cli/survey/`, its
//! inputs in `cli/mailbox/`, the dates of messages in `cli/date.rs`; each with its
//! tests in `tests.rs`) and `cturi`; `probe`,
//! the health check of a running daemon; `completions`, the shell completions. Every
//! command returns its outcome or its error, and one place (`cli/exit.rs`) turns them
//! into messages and exit codes, the daemon's `DaemonError` included.
//!
//! The last layer (`lib.rs`). `serve` converts
//! its arguments into the daemon's [`ServeOptions`]; the offline tools use the engine,
//! the configuration and the policy's intake and planner, never the milter.
//!
//! Exit codes of `check`: 0 no findings, 1 findings, 2 error. `fix`: 0 wrote a message,
//! 1 (`--as-milter`) the daemon would refuse it, 2 error. `survey`: 0 every input read,
//! 1 some could not be or were skipped (a link out of the tree, a FIFO: the summary says
//! which and why), 2 error. `probe`: 0 ready, 1 not (or no answer). Everything else: 0 success, 1
//! failure (e.g. config errors), 2 usage.

mod date;
mod exit;
mod mailbox;
mod survey;

/// What the fuzz targets reach of the command line's readers (fuzz/fuzz_targets).
#[doc(hidden)]
pub mod fuzzing {
    pub use super::mailbox::{fuzz as mailbox, split_offset};
}

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::Config;
use crate::daemon::{self, ServeOptions};
use crate::engine::{self, Analysis};
use crate::policy::intake::AsReceived;
use crate::policy::matching;
use crate::policy::plan::{self, Plan};
use crate::policy::scope::{Envelope, Selection};
use crate::policy::Direction;
use exit::{failed, input_not_read, not_read, CliError, Done};
use mailbox::Message;

#[derive(Parser, Debug)]
#[command(
    name = "mimeref-milter",
    version,
    about = "Milter that keeps the references inside MIME messages well-formed",
    args_conflicts_with_subcommands = true,
    after_help = examples(&[
        "mimeref-milter --config /etc/mimeref-milter/mimeref-milter.toml --dry-run",
        "mimeref-milter help survey",
    ])
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

// Every subcommand's help ends with two examples (`tests::every_command_ends_with_two_examples`
// parses them): what admins copy first, the way `postconf(1)` and `git help` show it.
#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run the milter daemon (the default without a subcommand).
    #[command(after_help = examples(&[
        "mimeref-milter serve --config /etc/mimeref-milter/mimeref-milter.toml",
        "mimeref-milter serve --socket unix:/run/mimeref-milter/milter.sock --dry-run",
    ]))]
    Serve(ServeArgs),
    /// Validate the configuration; print every error with file:line.
    #[command(after_help = examples(&[
        "mimeref-milter config-check --config /etc/mimeref-milter/mimeref-milter.toml",
        "mimeref-milter config-dump -n | mimeref-milter config-check -",
    ]))]
    ConfigCheck {
        /// Configuration file; - reads standard input [default: /etc/mimeref-milter/mimeref-milter.toml, else built-in defaults]
        #[arg(long, short = 'c', value_name = "FILE")]
        config: Option<PathBuf>,
        /// The same as --config FILE, so that `config-dump | config-check -` reads the dump
        #[arg(value_name = "FILE", conflicts_with = "config")]
        file: Option<PathBuf>,
    },
    /// Print the configuration in force as TOML, each value with the file and line it
    /// came from (or "built-in"); secrets masked.
    #[command(after_help = examples(&[
        "mimeref-milter config-dump -n",
        "mimeref-milter config-dump --config /etc/mimeref-milter/mimeref-milter.toml > effective.toml",
    ]))]
    ConfigDump(ConfigDumpArgs),
    /// Check message files offline and print the findings.
    #[command(after_help = examples(&[
        "mimeref-milter check --actions message.eml",
        "mimeref-milter check --format json --direction outbound /var/mail/alice",
    ]))]
    Check(CheckArgs),
    /// Write a message with every fixable finding fixed.
    #[command(after_help = examples(&[
        "mimeref-milter fix message.eml -o fixed.eml",
        "mimeref-milter fix --as-milter --macro {auth_authen}=alice message.eml",
    ]))]
    Fix(FixArgs),
    /// What the daemon would have done to mail you already have: .eml files,
    /// directories, mbox files and Maildir folders, summarised.
    #[command(after_help = examples(&[
        "mimeref-milter survey --config /etc/mimeref-milter/mimeref-milter.toml /var/mail/alice ~bob/Maildir",
        "mimeref-milter survey --format json --direction outbound ~/Maildir/.Sent",
    ]))]
    Survey(survey::SurveyArgs),
    /// Map between Content-Types and ContentType: URIs (draft-eastlake-cturi).
    #[command(subcommand, after_help = examples(&[
        "mimeref-milter cturi to-uri 'text/plain; charset=us-ascii'",
        "mimeref-milter cturi to-content-type ContentType:text/plain;charset=us-ascii",
    ]))]
    Cturi(CturiCommand),
    /// Whether the running daemon takes mail: /readyz of metrics_listen, else an
    /// option negotiation on the milter socket; exit 0 (ready) or 1, with one line
    /// saying why. For a container's HEALTHCHECK: needs no curl.
    #[command(after_help = examples(&[
        "mimeref-milter probe",
        "mimeref-milter probe --milter --socket inet:127.0.0.1:8897 --timeout 2",
    ]))]
    Probe(ProbeArgs),
    /// Print the shell completions for SHELL on standard output. The packages install
    /// them for bash, zsh and fish.
    #[command(after_help = examples(&[
        "mimeref-milter completions bash > ~/.local/share/bash-completion/completions/mimeref-milter",
        "mimeref-milter completions zsh > ~/.zfunc/_mimeref-milter",
    ]))]
    Completions {
        /// The shell to write them for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The `Examples:` block that ends a command's help.
fn examples(lines: &[&str]) -> String {
    let mut s = String::from("Examples:");
    for l in lines {
        s.push_str("\n  ");
        s.push_str(l);
    }
    s
}

#[derive(Args, Debug)]
pub(crate) struct ConfigDumpArgs {
    /// Configuration file; - reads standard input [default: /etc/mimeref-milter/mimeref-milter.toml, else built-in defaults]
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Only the values that differ from the built-in defaults (as postconf -n)
    #[arg(short = 'n', long = "non-default")]
    pub non_default: bool,
    /// Write URL credentials and literal query values instead of masking them as ***
    #[arg(long)]
    pub show_secrets: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ProbeArgs {
    /// The daemon's configuration file [default: /etc/mimeref-milter/mimeref-milter.toml, else built-in defaults]
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Ask the milter socket SPEC (as given to serve --socket) instead of the config's
    #[arg(long, short = 's', value_name = "SPEC")]
    pub socket: Option<String>,
    /// Negotiate on the milter socket even when metrics_listen is set
    #[arg(long)]
    pub milter: bool,
    /// Seconds to wait for the answer
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub timeout: f64,
}

#[derive(Args, Debug, Default, Clone)]
pub(crate) struct ServeArgs {
    /// Configuration file [default: /etc/mimeref-milter/mimeref-milter.toml, else built-in defaults]
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Listening socket, overriding the config: inet:HOST:PORT, inet:PORT@HOST, inet6:…, unix:/PATH
    #[arg(long, short = 's', value_name = "SPEC")]
    pub socket: Option<String>,
    /// Analyse, log and report what would be done; change nothing, reject nothing.
    #[arg(long)]
    pub dry_run: bool,
}

impl From<ServeArgs> for ServeOptions {
    fn from(a: ServeArgs) -> ServeOptions {
        ServeOptions {
            config: a.config,
            socket: a.socket,
            dry_run: a.dry_run,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Text,
    Json,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirectionArg {
    Inbound,
    Outbound,
}

/// What the MTA would tell the daemon about a message besides its bytes: for the
/// direction and the `[[scope]]` tables.
#[derive(Args, Debug, Default, Clone)]
pub(crate) struct EnvelopeArgs {
    /// A milter macro as the MTA would send it, e.g. --macro '{auth_authen}=alice'
    #[arg(long = "macro", value_name = "NAME=VALUE")]
    pub macros: Vec<String>,
    /// The SMTP client's address, for trusted_networks and scopes' client_networks
    #[arg(long, value_name = "IP")]
    pub client_addr: Option<IpAddr>,
    /// The envelope sender (MAIL FROM) for scopes' senders; <> is the null sender
    #[arg(long = "from", value_name = "ADDRESS")]
    pub from: Option<String>,
    /// An envelope recipient (RCPT TO) for scopes' recipients; once per recipient
    #[arg(long = "rcpt", value_name = "ADDRESS")]
    pub rcpt: Vec<String>,
    /// A header field scopes match as if the message carried it, e.g.
    /// --header 'List-Id: <announce.example.org>' (the message's own fields count too)
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
}

impl EnvelopeArgs {
    fn given(&self) -> bool {
        !self.macros.is_empty()
            || self.client_addr.is_some()
            || self.from.is_some()
            || !self.rcpt.is_empty()
            || !self.headers.is_empty()
    }

    fn macros(&self) -> Result<BTreeMap<String, String>, String> {
        let mut macros = BTreeMap::new();
        for m in &self.macros {
            match m.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    macros.insert(k.to_string(), v.to_string());
                }
                _ => return Err(format!("--macro {m:?}: expected NAME=VALUE")),
            }
        }
        Ok(macros)
    }

    /// The direction (`--direction`, else from the macros and the client address as
    /// the daemon decides it) and the envelope the scopes see.
    fn resolve(
        &self,
        cfg: &Config,
        direction: Option<DirectionArg>,
    ) -> Result<(Direction, Envelope), String> {
        let macros = self.macros()?;
        let get = |name: &str| {
            macros
                .get(name)
                .or_else(|| macros.get(name.trim_start_matches('{').trim_end_matches('}')))
                .filter(|v| !v.is_empty())
        };
        let client_addr = self
            .client_addr
            .or_else(|| get("{client_addr}").and_then(|a| crate::policy::direction::parse_ip(a)));
        let direction = match direction {
            Some(DirectionArg::Inbound) => Direction::Inbound,
            Some(DirectionArg::Outbound) => Direction::Outbound,
            None => cfg.directions().direction(&macros, client_addr),
        };
        let mut recipients = cfg.policy().scopes.recipients();
        for r in &self.rcpt {
            recipients.add(&cfg.policy().scopes, r.as_bytes());
        }
        let mut extra_headers = Vec::new();
        for h in &self.headers {
            match h.split_once(':') {
                Some((n, v)) if !n.trim().is_empty() && !n.trim().contains(' ') => {
                    extra_headers.push((n.trim().to_string(), v.trim().as_bytes().to_vec()))
                }
                _ => return Err(format!("--header {h:?}: expected NAME: VALUE")),
            }
        }
        let envelope = Envelope {
            sender: self
                .from
                .as_deref()
                .map(|a| matching::normalize_address(a.as_bytes())),
            recipients,
            client_addr,
            sasl_login: get("{auth_authen}").cloned(),
            extra_headers,
        };
        Ok((direction, envelope))
    }
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// One line per finding (text) or one JSON object per file (json)
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Configuration file (policy, limits, schemes)
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Treat the message as inbound or outbound instead of deriving it from macros
    #[arg(long, value_enum)]
    pub direction: Option<DirectionArg>,
    #[command(flatten)]
    pub envelope: EnvelopeArgs,
    /// Print the milter actions the daemon would send for each message
    #[arg(long)]
    pub actions: bool,
    /// Message files, FILE:OFFSET for a message of an mbox (as survey names it), mbox
    /// files (each message checked); - reads standard input
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct FixArgs {
    /// Configuration file (policy, limits, schemes)
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Write the message as the MTA would deliver it through the daemon: only what the
    /// policy of the direction fixes, plus the report header. Exit 1, writing nothing,
    /// when the daemon would reject or tempfail it.
    #[arg(long)]
    pub as_milter: bool,
    /// The direction for --as-milter [default: from --macro and --client-addr as the
    /// daemon derives it, which is inbound without them]
    #[arg(long, value_enum, requires = "as_milter")]
    pub direction: Option<DirectionArg>,
    /// With --as-milter: what the MTA would tell the daemon (direction, scopes)
    #[command(flatten)]
    pub envelope: EnvelopeArgs,
    /// Message file, or FILE:OFFSET for a message of an mbox (as survey names it); -
    /// reads standard input
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Output file [default: standard output]
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum CturiCommand {
    /// Content-Type to ContentType: URI, e.g. 'text/plain; charset=us-ascii'
    #[command(after_help = examples(&[
        "mimeref-milter cturi to-uri 'text/plain; charset=us-ascii'",
        "mimeref-milter cturi to-uri 'application/vnd.ms-excel; name=q3.xls'",
    ]))]
    ToUri {
        /// The Content-Type value, e.g. 'text/plain; charset=us-ascii'
        content_type: String,
    },
    /// URI to application/uri.* Content-Type
    #[command(after_help = examples(&[
        "mimeref-milter cturi to-content-type ContentType:text/plain;charset=us-ascii",
        "mimeref-milter cturi to-content-type http://www.example.org/schemas/invoice",
    ]))]
    ToContentType {
        /// The ContentType: URI, e.g. 'ContentType:text/plain;charset=us-ascii'
        uri: String,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    exit::status(match cli.command {
        None => serve(cli.serve.into()),
        Some(Command::Serve(args)) => serve(args.into()),
        Some(Command::ConfigCheck { config, file }) => config_check(config.or(file).as_deref()),
        Some(Command::ConfigDump(args)) => config_dump(args),
        Some(Command::Check(args)) => check(args),
        Some(Command::Fix(args)) => fix(args),
        Some(Command::Survey(args)) => survey::run(args),
        Some(Command::Cturi(c)) => cturi(c),
        Some(Command::Probe(args)) => probe(args),
        Some(Command::Completions { shell }) => completions(shell),
    })
}

/// `mimeref-milter completions SHELL`: from the clap definition itself, so that they
/// know every option this binary has. The packages run it at build time.
fn completions(shell: clap_complete::Shell) -> Result<Done, CliError> {
    use clap::CommandFactory;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "mimeref-milter", &mut out);
    std::io::stdout()
        .lock()
        .write_all(&out)
        .map_err(|e| failed(format!("standard output: {e}")))?;
    Ok(Done::Success)
}

/// `mimeref-milter probe`: 0 ready, 1 anything else, the configuration that cannot be
/// read included (a health check's codes: 2 means something else to Docker).
fn probe(args: ProbeArgs) -> Result<Done, CliError> {
    let answer = (|| {
        let cfg = load_config(args.config.as_deref())?;
        let socket = args
            .socket
            .as_deref()
            .map(crate::config::SocketSpec::parse)
            .transpose()
            .map_err(|e| e.to_string())?;
        let timeout = std::time::Duration::try_from_secs_f64(args.timeout)
            .map_err(|_| format!("--timeout {}: not a number of seconds", args.timeout))?;
        let target = daemon::probe::ProbeTarget::from_config(&cfg, socket, args.milter);
        daemon::probe::probe(&target, timeout)
    })();
    let line = answer.map_err(CliError::NotReady)?;
    println!("ready: {line}");
    Ok(Done::Success)
}

/// A configuration named as `config-check` and `config-dump` take it: `-` is standard
/// input (named so in messages), else as [`Config::load`]. With the text read, for
/// `config-dump`'s lines.
fn load_named(path: Option<&Path>) -> Result<(Config, Option<String>), CliError> {
    if path != Some(Path::new("-")) {
        return Config::load_with_text(path).map_err(CliError::Config);
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text)
        .map_err(|e| failed(format!("standard input: {e}")))?;
    let cfg = Config::parse(&text, STDIN_NAME).map_err(CliError::Config)?;
    Ok((cfg, Some(text)))
}

/// What configuration errors read from standard input name as their file.
const STDIN_NAME: &str = "standard input";

/// `mimeref-milter config-check`.
fn config_check(path: Option<&Path>) -> Result<Done, CliError> {
    let (cfg, text) = load_named(path)?;
    match (cfg.file(), text) {
        (Some(f), _) => println!("{}: OK", f.display()),
        (None, Some(_)) => println!("{STDIN_NAME}: OK"),
        (None, None) => println!("no configuration file; built-in defaults: OK"),
    }
    // Valid, so not errors; but each exposes the daemon more than it needs.
    for w in daemon::warnings(&cfg, None) {
        eprintln!("warning: {w}");
    }
    // `serve` raises its soft limit to the hard one: judge by that. A warning, not an
    // error: the service may well run under another limit.
    let hard = daemon::nofile::current().hard.unwrap_or(u64::MAX);
    if let Some(text) = daemon::nofile::advice(cfg.listen(), hard) {
        eprintln!(
            "warning: {text} (judged by the hard limit here; a systemd service \
             has its unit's LimitNOFILE=)"
        );
    }
    Ok(Done::Success)
}

/// `mimeref-milter config-dump`: the configuration as the daemon would run it. The
/// exposure warnings go to standard error as config-check prints them, so that the
/// dump on standard output stays TOML.
fn config_dump(args: ConfigDumpArgs) -> Result<Done, CliError> {
    let (cfg, text) = load_named(args.config.as_deref())?;
    for w in daemon::warnings(&cfg, None) {
        eprintln!("warning: {w}");
    }
    let dump = cfg.dump(
        text.as_deref(),
        crate::config::DumpOptions {
            changed_only: args.non_default,
            show_secrets: args.show_secrets,
        },
    );
    std::io::stdout()
        .lock()
        .write_all(dump.as_bytes())
        .map_err(|e| failed(format!("standard output: {e}")))?;
    Ok(Done::Success)
}

/// The daemon; what its error comes to is `exit`'s.
fn serve(opts: ServeOptions) -> Result<Done, CliError> {
    daemon::serve(opts).map_err(CliError::Daemon)?;
    Ok(Done::Success)
}

fn load_config(path: Option<&Path>) -> Result<Config, String> {
    Config::load(path).map_err(|e| e.to_string())
}

/// `s` with its control characters escaped (`\n`, `\u{1b}`): a file name or a header
/// value from a mailbox must not make a line of its own in the output, nor drive the
/// terminal.
pub(crate) fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A message read (at most `max_message_size` of it) as the daemon would have received
/// it: what was not read past the limit counts as not given.
pub(crate) fn received<'a>(cfg: &Config, m: &'a Message) -> AsReceived<'a> {
    let mut given = cfg.as_received(&m.bytes);
    if m.cut > 0 {
        given.incomplete = true;
        given.octets_not_given += m.cut;
    }
    given
}

fn display_name(path: &Path) -> String {
    path.display().to_string()
}

fn check(args: CheckArgs) -> Result<Done, CliError> {
    let cfg = load_config(args.config.as_deref()).map_err(failed)?;
    let (direction, envelope) = args
        .envelope
        .resolve(&cfg, args.direction)
        .map_err(failed)?;
    let opts = cfg.engine_options(direction);
    let mut any = false;
    let mut errors = false;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut written = Ok(());
    for path in &args.files {
        // An mbox is checked message by message, each named FILE:OFFSET as survey
        // names it; the rest of a message past max_message_size is not read.
        let res = mailbox::given(path, cfg.limits().max_message_size, &mut |m| {
            // Within [limits] as the daemon would have received it, so that the
            // findings and the plan are the daemon's.
            let given = received(&cfg, &m);
            let (analysis, scopes) = analyse(&cfg, direction, &envelope, &opts, &given);
            any |= !analysis.findings.is_empty();
            let res = match args.format {
                Format::Json => write_json(&mut out, &m.source, &analysis),
                Format::Text => write_text(&mut out, &printable(&m.source), &analysis),
            };
            written = res.and_then(|_| {
                if args.actions {
                    write!(
                        out,
                        "{}",
                        daemon_plan(&cfg, direction, &analysis, &given, &scopes)
                    )
                } else {
                    Ok(())
                }
            });
            written.is_ok()
        });
        if let Err(e) = written {
            return Err(failed(format!("writing output: {e}")));
        }
        if let Err(e) = res {
            input_not_read(&e);
            errors = true;
        }
    }
    Ok(if errors {
        Done::NotRead
    } else if any {
        Done::Findings
    } else {
        Done::Success
    })
}

/// The analysis the daemon would make of a message it received as `given`, in the
/// scopes the envelope and the message's header fields select.
pub(crate) fn analyse<'c>(
    cfg: &'c Config,
    direction: Direction,
    envelope: &Envelope,
    opts: &engine::Options,
    given: &AsReceived,
) -> (Analysis, Selection<'c>) {
    let scopes = cfg.policy().scopes.select(direction, envelope, given.bytes);
    let mut opts = given.options(opts);
    let fix_signed = scopes.fix_signed(cfg.fixes().fix_signed);
    if opts.fix_signed != fix_signed {
        opts.to_mut().fix_signed = fix_signed;
    }
    (engine::check(given.bytes, &opts), scopes)
}

/// The plan the daemon would carry out for a message it received as `given`.
pub(crate) fn daemon_plan(
    cfg: &Config,
    direction: Direction,
    analysis: &Analysis,
    given: &AsReceived,
    scopes: &Selection,
) -> Plan {
    cfg.planner().plan_scoped(
        direction,
        analysis,
        given.bytes,
        cfg.service().dry_run,
        given.received(),
        scopes,
    )
}

fn write_text(out: &mut impl Write, name: &str, a: &Analysis) -> std::io::Result<()> {
    for f in &a.findings {
        let fix = if f.fixable { " [fixable]" } else { "" };
        writeln!(
            out,
            "{name}: {}: {}: {}: {}{fix}",
            f.part, f.severity, f.rule, f.message
        )?;
    }
    Ok(())
}

fn write_json(out: &mut impl Write, name: &str, a: &Analysis) -> std::io::Result<()> {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        file: &'a str,
        findings: &'a [engine::Finding],
        changed: bool,
    }
    // `changed` says whether `fix` would change the message.
    let changed = a.findings.iter().any(|f| f.fixable);
    let line = serde_json::to_string(&Line {
        file: name,
        findings: &a.findings,
        changed,
    })
    .map_err(std::io::Error::other)?;
    writeln!(out, "{line}")
}

fn fix(args: FixArgs) -> Result<Done, CliError> {
    let cfg = load_config(args.config.as_deref()).map_err(failed)?;
    if args.envelope.given() && !args.as_milter {
        return Err(failed(
            "--macro, --client-addr, --from, --rcpt and --header need --as-milter: plain \
             fix fixes every finding whatever the policy",
        ));
    }
    // The whole message: what fix does not change is written as it is. Of an mbox, the
    // first message, and whether another follows (read only to tell: fix then refuses).
    let mut got = None;
    let mut several = false;
    if let Err(e) = mailbox::given(&args.file, usize::MAX, &mut |m| {
        if got.is_some() {
            several = true;
            return false;
        }
        let more = m.in_mbox;
        got = Some(m);
        more
    }) {
        return Err(failed(not_read(&e)));
    }
    let Some(message) = got else {
        return Err(failed(format!(
            "{}: no message",
            printable(&display_name(&args.file))
        )));
    };
    if several {
        // An mbox of one message is fixed as FILE:0 would be (the message, without its
        // From line); of several, which one to write is the user's to say.
        return Err(failed(if args.file == Path::new("-") {
            "standard input is an mbox of several messages (it starts with a From \
             line); fix writes one message: save it to a file and name a message of it \
             as FILE:OFFSET, the offset of its From line as `survey` and `check` print \
             it (FILE:0 is the first)"
                .to_string()
        } else {
            let name = printable(&display_name(&args.file)).into_owned();
            format!(
                "{name} is an mbox of several messages (it starts with a From line); fix \
                 writes one message: name it as {name}:OFFSET, the offset of its From \
                 line as `survey` and `check` print it ({name}:0 is the first)"
            )
        }));
    }
    let raw = message.bytes;
    let (direction, envelope) = args
        .envelope
        .resolve(&cfg, args.direction)
        .map_err(failed)?;
    let opts = cfg.engine_options(direction);
    // The limits apply as in the daemon: past one, only the top-level heading can
    // change and the rest is passed on as it is.
    let given = cfg.as_received(&raw);
    let rest = &raw[given.bytes.len()..];
    let fixed = if args.as_milter {
        let (analysis, scopes) = analyse(&cfg, direction, &envelope, &opts, &given);
        let plan = daemon_plan(&cfg, direction, &analysis, &given, &scopes);
        match plan::delivered(&plan, given.bytes, &cfg.limits().engine()) {
            Some(mut m) => {
                m.extend_from_slice(rest);
                m
            }
            None => {
                let reply = plan.reply.map(|r| r.to_string()).unwrap_or_default();
                return Err(CliError::Refused(reply));
            }
        }
    } else {
        // Every fixable finding is fixed, whatever the policy; only the engine options
        // (limits, schemes, signed-mail setting) come from the config.
        match engine::fix(given.bytes, &given.options(&opts)) {
            Ok((mut fixed, _)) => {
                fixed.extend_from_slice(rest);
                fixed
            }
            Err(e) => {
                return Err(failed(format!(
                    "{}: cannot apply the fixes: {e}",
                    printable(&display_name(&args.file))
                )))
            }
        }
    };
    let res = match &args.output {
        Some(p) => std::fs::write(p, &fixed).map_err(|e| format!("{}: {e}", p.display())),
        None => std::io::stdout()
            .lock()
            .write_all(&fixed)
            .map_err(|e| format!("standard output: {e}")),
    };
    res.map_err(failed)?;
    Ok(Done::Success)
}

fn cturi(c: CturiCommand) -> Result<Done, CliError> {
    let res = match c {
        CturiCommand::ToUri { content_type } => engine::syntax::cturi_map::to_uri(&content_type),
        CturiCommand::ToContentType { uri } => engine::syntax::cturi_map::to_content_type(&uri),
    };
    println!("{}", res.map_err(failed)?);
    Ok(Done::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The words of an example as a shell would pass them: blanks split, '…' quotes
    /// (the only quoting the examples use) keep them together.
    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word: Option<String> = None;
        let mut quoted = false;
        for c in line.chars() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    word.get_or_insert_with(String::new);
                }
                c if c.is_whitespace() && !quoted => out.extend(word.take()),
                c => word.get_or_insert_with(String::new).push(c),
            }
        }
        out.extend(word);
        out
    }

    /// `--help` of every command ends with two examples, and each example (each
    /// command of a pipeline) is a command line this binary accepts: an option renamed
    /// later cannot leave a stale example behind.
    #[test]
    fn every_command_ends_with_two_examples() {
        fn walk(cmd: &clap::Command, path: Vec<String>, all: &mut Vec<Vec<String>>) {
            all.push(path.clone());
            for sub in cmd.get_subcommands() {
                let mut p = path.clone();
                p.push(sub.get_name().to_string());
                walk(sub, p, all);
            }
        }
        let mut all = Vec::new();
        walk(&Cli::command(), Vec::new(), &mut all);
        // The help command clap adds has no options of its own to show.
        all.retain(|p| p.first().is_none_or(|c| c != "help"));
        assert!(all.len() >= 12, "{all:?}");
        for path in all {
            let mut argv = vec!["mimeref-milter".to_string()];
            argv.extend(path.iter().cloned());
            for flag in ["-h", "--help"] {
                let mut a = argv.clone();
                a.push(flag.into());
                let err = Cli::try_parse_from(&a).expect_err("help is an early exit");
                assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp, "{a:?}");
                let help = err.render().to_string();
                let tail: Vec<&str> = help.trim_end().lines().rev().take(3).collect();
                assert_eq!(tail.get(2), Some(&"Examples:"), "{a:?}:\n{help}");
                for example in &tail[..2] {
                    let line = example
                        .strip_prefix("  mimeref-milter ")
                        .unwrap_or_else(|| panic!("{a:?}: not an example: {example:?}"));
                    let cmd = format!("mimeref-milter {line}");
                    for part in cmd.split(" | ") {
                        let part = part.split(" > ").next().unwrap();
                        let w = words(part);
                        assert_eq!(w[0], "mimeref-milter", "{part}");
                        if let Err(e) = Cli::try_parse_from(&w) {
                            assert_eq!(
                                e.kind(),
                                clap::error::ErrorKind::DisplayHelp,
                                "{a:?}: example {part:?} does not parse: {e}"
                            );
                        }
                    }
                    // The examples of a subcommand use it.
                    assert!(
                        path.is_empty() || cmd.contains(&path.join(" ")),
                        "{a:?}: {cmd}"
                    );
                }
            }
        }
    }

    /// Every option and argument of every command says what it is in `--help`: an
    /// empty help line (as `fix -c` had) leaves the admin guessing.
    #[test]
    fn every_argument_has_a_help_line() {
        fn walk(cmd: &clap::Command, path: &str, empty: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                    empty.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), empty);
            }
        }
        let mut empty = Vec::new();
        walk(&Cli::command(), "mimeref-milter", &mut empty);
        assert!(empty.is_empty(), "no help line: {empty:?}");
    }
}
