//! The networks users really have: a private CA (`ca_file`), mutual TLS (`client_cert` +
//! `client_key`) and an HTTP `CONNECT` proxy (`HTTPS_PROXY`, a target's `proxy`), each
//! against the simulator on 127.0.0.1 serving a chain signed by a CA made here, and a
//! `CONNECT` proxy written in this file.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use spark_bench::commands::run::load_plan;
use spark_bench::runner::{self, Options};
use spark_bench::sim::{self, SimConfig, SimHandle};
use spark_bench::store::LoadedRun;
use spark_bench::tls::SelfSigned;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::binary::{csv_maps, only_run, spark_bench, texts, BIN_LIMIT};
use crate::support::run::scenario;

/// A private CA, a server leaf for `localhost`/`127.0.0.1` and a client leaf, all signed by
/// it, written as PEM files into `dir`.
struct Pki {
    ca_pem: String,
    server_chain_pem: String,
    server_key_pem: String,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair, KeyUsagePurpose,
        };
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "spark-bench test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();

        let mut server =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().unwrap();
        let server_cert = server.signed_by(&server_key, &ca).unwrap();

        let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
        client
            .distinguished_name
            .push(DnType::CommonName, "bench client");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate().unwrap();
        let client_cert = client.signed_by(&client_key, &ca).unwrap();

        // A client certificate from a stranger CA: the server must refuse it.
        let stranger = KeyPair::generate().unwrap();
        let mut sp = CertificateParams::new(Vec::<String>::new()).unwrap();
        sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let stranger_cert = sp.self_signed(&stranger).unwrap();

        let w = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
        w("ca.pem", &ca.pem());
        w("client.pem", &client_cert.pem());
        w("client.key", &client_key.serialize_pem());
        w("stranger.pem", &stranger_cert.pem());
        w("stranger.key", &stranger.serialize_pem());
        w("garbage.pem", "not a certificate\n");
        Pki {
            ca_pem: ca.pem(),
            server_chain_pem: server_cert.pem(),
            server_key_pem: server_key.serialize_pem(),
        }
    }

    /// The simulator serving the CA-signed leaf, optionally requiring client certificates.
    async fn sim(&self, require_client_cert: bool) -> SimHandle {
        let mut id = SelfSigned::from_pem(&self.server_chain_pem, &self.server_key_pem).unwrap();
        if require_client_cert {
            id = id.require_client_certs(&self.ca_pem).unwrap();
        }
        let mut cfg = SimConfig::new(sim::Profile::builtin("wafer").unwrap());
        cfg.tls = Some(id);
        sim::spawn(cfg).await.unwrap()
    }
}

/// A scenario with one real target `corp` at `base_url` and extra target keys.
fn corp_scenario(
    dir: &Path,
    name: &str,
    base_url: &str,
    transports: &str,
    keys: &str,
) -> std::path::PathBuf {
    scenario(
        dir,
        name,
        &format!(
            r#"
name = "corp"
max_output_tokens = 8
[load]
sessions = 2
[matrix]
targets = ["corp"]
transports = [{transports}]
[targets.corp]
base_url = "{base_url}"
model = "sim-wafer"
{keys}
[[turns]]
prompt = "Hello."
[[turns]]
prompt = "Again."
"#
        ),
    )
}

/// Runs a scenario through the library, quietly; `Err` is the run's error text.
async fn run(scenario: &Path, out: &Path) -> Result<LoadedRun, String> {
    let argv = [
        "spark-bench",
        "run",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let cli = <spark_bench::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let spark_bench::cli::Command::Run(args) = cli.command else {
        unreachable!()
    };
    let plan = std::sync::Arc::new(load_plan(&args).map_err(|e| format!("{e:#}"))?);
    let outcome = runner::run(plan, &args.out, Options::quiet())
        .await
        .map_err(|e| format!("{e:#}"))?;
    Ok(LoadedRun::open(&outcome.dir).unwrap())
}

/// `requests.csv` of a run.
fn rows(run: &LoadedRun) -> Vec<HashMap<String, String>> {
    csv_maps(&run.dir.join("requests.csv"))
}

/// The transport probes a run made before its requests (`manifest.json`): each opened one
/// connection of its own, through the target's proxy where it has one.
fn probes(dir: &Path) -> usize {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    manifest["transport_probes"]
        .as_array()
        .map_or(0, |a| a.len())
}

fn outcomes(rows: &[HashMap<String, String>]) -> Vec<(String, String)> {
    rows.iter()
        .map(|r| (r["outcome"].clone(), r["error"].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_ca_is_trusted_through_ca_file_and_refused_without_it() {
    let tmp = testkit::tempdir().unwrap();
    let pki = Pki::new(tmp.path());
    let sim = pki.sim(false).await;
    let transports = r#""http", "http-pooled", "http2", "ws""#;
    // `ca_file` is relative to the scenario's folder, not to the working directory.
    let s = corp_scenario(
        tmp.path(),
        "ca.toml",
        &sim.base_url,
        transports,
        "ca_file = \"ca.pem\"\nproxy = \"none\"",
    );
    let ok = run(&s, &tmp.path().join("r1")).await.unwrap();
    let r = rows(&ok);
    assert_eq!(r.len(), 4 * 2 * 2 + 2, "{:?}", outcomes(&r)); // + ws warm-ups
    assert!(r.iter().all(|x| x["outcome"] == "ok"), "{:?}", outcomes(&r));
    // TLS was verified and used: every new connection paid a handshake.
    for x in r.iter().filter(|x| x["connection_reused"] == "false") {
        assert!(!x["tls_handshake_ns"].is_empty(), "{x:?}");
        assert!(x["proxy_connect_ns"].is_empty(), "{x:?}");
    }
    let plan = ok.plan().unwrap();
    assert_eq!(
        plan.cells[0].target.net.ca_file.as_deref(),
        Some(tmp.path().join("ca.pem").as_path())
    );

    // Without the CA the leaf is refused (system store and bundled roots do not know it).
    let s = corp_scenario(
        tmp.path(),
        "noca.toml",
        &sim.base_url,
        transports,
        "proxy = \"none\"",
    );
    let refused = run(&s, &tmp.path().join("r2")).await.unwrap();
    let r = rows(&refused);
    assert!(!r.is_empty());
    assert!(
        r.iter()
            .all(|x| x["outcome"] == "tls-error"
                && x["error"].to_lowercase().contains("certificate")),
        "{:?}",
        outcomes(&r)
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_certificate_files_are_named_before_any_request() {
    let tmp = testkit::tempdir().unwrap();
    let _pki = Pki::new(tmp.path());
    let url = "https://127.0.0.1:9/v1"; // never reached
    let cases = [
        ("ca_file = \"missing.pem\"", "ca_file", "missing.pem"),
        ("ca_file = \"garbage.pem\"", "ca_file", "garbage.pem"),
        (
            "client_cert = \"client.pem\"\nclient_key = \"garbage.pem\"",
            "client_key",
            "garbage.pem",
        ),
        (
            "client_cert = \"client.pem\"\nclient_key = \"stranger.key\"",
            "client_key",
            "stranger.key",
        ),
        (
            "client_cert = \"nowhere/client.pem\"\nclient_key = \"client.key\"",
            "client_cert",
            "client.pem",
        ),
    ];
    for (i, (keys, key, file)) in cases.iter().enumerate() {
        let s = corp_scenario(tmp.path(), &format!("bad{i}.toml"), url, "\"http\"", keys);
        let out = tmp.path().join(format!("out{i}"));
        let e = run(&s, &out).await.unwrap_err();
        assert!(
            e.contains("target corp") && e.contains(key) && e.contains(file),
            "{keys}: {e}"
        );
        assert!(!e.contains("PRIVATE KEY-----\n"), "{e}");
        assert!(!out.exists(), "{keys}: a results directory was created");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_passes_with_the_client_certificate_and_fails_clearly_without() {
    let tmp = testkit::tempdir().unwrap();
    let pki = Pki::new(tmp.path());
    let sim = pki.sim(true).await;
    let transports = r#""http", "http-pooled", "http2", "ws""#;
    let s = corp_scenario(
        tmp.path(),
        "mtls.toml",
        &sim.base_url,
        transports,
        "ca_file = \"ca.pem\"\nclient_cert = \"client.pem\"\nclient_key = \"client.key\"\nproxy = \"none\"",
    );
    let ok = run(&s, &tmp.path().join("r1")).await.unwrap();
    let r = rows(&ok);
    assert!(
        !r.is_empty() && r.iter().all(|x| x["outcome"] == "ok"),
        "{:?}",
        outcomes(&r)
    );
    // The results say which files were used, never what is in them.
    for entry in walk(&ok.dir) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !contains(&bytes, b"PRIVATE KEY"),
            "{} holds key material",
            entry.display()
        );
    }

    for (name, keys) in [
        ("nocert.toml", "ca_file = \"ca.pem\"\nproxy = \"none\""),
        (
            "stranger.toml",
            "ca_file = \"ca.pem\"\nclient_cert = \"stranger.pem\"\nclient_key = \"stranger.key\"\nproxy = \"none\"",
        ),
    ] {
        let s = corp_scenario(tmp.path(), name, &sim.base_url, transports, keys);
        let refused = run(&s, &tmp.path().join(name.replace(".toml", ""))).await.unwrap();
        let r = rows(&refused);
        assert!(!r.is_empty());
        for x in &r {
            assert_eq!(x["outcome"], "tls-error", "{name}: {} {:?}", x["transport"], outcomes(&r));
            assert!(x["error"].contains("client certificate"), "{name}: {x:?}");
        }
    }
    sim.shutdown().await;
}

/// An HTTP `CONNECT` proxy: one tunnel per accepted connection, counted; refuses with 407
/// when it wants credentials and gets others.
struct TestProxy {
    addr: std::net::SocketAddr,
    tunnels: Arc<AtomicUsize>,
    /// The `Proxy-Authorization` values seen.
    auth_seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl TestProxy {
    async fn spawn(want_auth: Option<String>) -> TestProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tunnels = Arc::new(AtomicUsize::new(0));
        let auth_seen = Arc::new(Mutex::new(Vec::new()));
        let (t, a) = (tunnels.clone(), auth_seen.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    return;
                };
                let (t, a, want) = (t.clone(), a.clone(), want_auth.clone());
                tokio::spawn(async move {
                    let _ = serve_tunnel(conn, t, a, want).await;
                });
            }
        });
        TestProxy {
            addr,
            tunnels,
            auth_seen,
            task,
        }
    }

    fn tunnels(&self) -> usize {
        self.tunnels.load(Ordering::SeqCst)
    }
}

impl Drop for TestProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_tunnel(
    mut conn: TcpStream,
    tunnels: Arc<AtomicUsize>,
    auth_seen: Arc<Mutex<Vec<String>>>,
    want_auth: Option<String>,
) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    // Byte by byte up to the blank line: nothing of the tunnel is read here.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let b = conn.read_u8().await?;
        head.push(b);
        assert!(head.len() < 8192, "CONNECT head too long");
    }
    let head = String::from_utf8(head).unwrap();
    let mut lines = head.split("\r\n");
    let request = lines.next().unwrap().to_string();
    let mut parts = request.split(' ');
    assert_eq!(parts.next(), Some("CONNECT"), "{request}");
    let target = parts.next().unwrap().to_string();
    let auth = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("proxy-authorization"))
        .map(|(_, v)| v.trim().to_string());
    if let Some(a) = &auth {
        auth_seen.lock().unwrap().push(a.clone());
    }
    if want_auth.is_some() && auth != want_auth {
        conn.write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"t\"\r\nContent-Length: 0\r\n\r\n")
            .await?;
        return Ok(());
    }
    let mut up = match TcpStream::connect(&target).await {
        Ok(up) => up,
        Err(_) => {
            conn.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                .await?;
            return Ok(());
        }
    };
    up.set_nodelay(true)?;
    tunnels.fetch_add(1, Ordering::SeqCst);
    conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut conn, &mut up).await?;
    Ok(())
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The spark-bench binary with only the proxy variables given here (none from the test's
/// environment).
fn bench_with_proxy_env(args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
    let mut cmd = spark_bench(args);
    for k in [
        "https_proxy",
        "HTTPS_PROXY",
        "http_proxy",
        "HTTP_PROXY",
        "no_proxy",
        "NO_PROXY",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transport_tunnels_through_https_proxy_with_tls_verified_and_no_credential_written() {
    const USER: &str = "bench-user";
    const PASS: &str = "pr0xy-S3CRET-7f1e";
    let tmp = testkit::tempdir().unwrap();
    let pki = Pki::new(tmp.path());
    let sim = pki.sim(false).await;
    use base64::Engine as _;
    let want = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASS}"))
    );
    let proxy = TestProxy::spawn(Some(want.clone())).await;
    let s = corp_scenario(
        tmp.path(),
        "proxied.toml",
        &sim.base_url,
        r#""http", "http-pooled", "http2", "ws""#,
        "ca_file = \"ca.pem\"",
    );
    let out = tmp.path().join("results");
    let proxy_url = format!("http://{USER}:{PASS}@{}", proxy.addr);
    let args = [
        "run",
        s.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-report",
    ];
    let o = tokio::time::timeout(
        BIN_LIMIT,
        bench_with_proxy_env(
            &args,
            &[
                ("HTTPS_PROXY", &proxy_url),
                ("NO_PROXY", "example.com,10.0.0.0/8"),
            ],
        )
        .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let (stdout, stderr) = texts(&o);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stdout.contains(PASS) && !stderr.contains(PASS), "{stderr}");
    assert!(
        stderr.contains(&format!("through proxy http://{}", proxy.addr)),
        "{stderr}"
    );
    let dir = only_run(&out);
    let r = csv_maps(&dir.join("requests.csv"));
    assert_eq!(r.len(), 4 * 2 * 2 + 2, "{:?}", outcomes(&r));
    assert!(r.iter().all(|x| x["outcome"] == "ok"), "{:?}", outcomes(&r));
    // New connections paid the tunnel (then TLS inside it); reused ones paid nothing.
    let mut opened = HashSet::new();
    let mut reused = 0;
    for x in &r {
        if x["connection_reused"] == "false" {
            let ns: u64 = x["proxy_connect_ns"]
                .parse()
                .unwrap_or_else(|_| panic!("{x:?}"));
            assert!(ns > 0, "{x:?}");
            assert!(
                !x["tcp_connect_ns"].is_empty() && !x["tls_handshake_ns"].is_empty(),
                "{x:?}"
            );
            assert!(opened.insert(x["connection_id"].clone()), "{x:?}");
        } else {
            reused += 1;
            assert!(x["proxy_connect_ns"].is_empty(), "{x:?}");
            assert!(x["tls_handshake_ns"].is_empty(), "{x:?}");
        }
    }
    assert!(reused > 0, "no request reused a connection");
    // The manifest says how the target was reached, without the credentials.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let how = manifest["network"]["corp"].as_str().unwrap_or_default();
    assert!(
        how.contains(&format!("proxy: http://{}", proxy.addr))
            && how.contains("ca_file")
            && how.contains("system store"),
        "{manifest}"
    );
    // Every connection the run opened (its probes' included) was a tunnel through the
    // proxy, with the credentials.
    assert_eq!(proxy.tunnels(), opened.len() + probes(&dir));
    assert!(proxy.auth_seen.lock().unwrap().iter().all(|a| *a == want));
    for p in walk(&dir) {
        let bytes = std::fs::read(&p).unwrap();
        for secret in [PASS.as_bytes(), want.as_bytes(), &want.as_bytes()[6..]] {
            assert!(
                !contains(&bytes, secret),
                "{} holds a proxy credential",
                p.display()
            );
        }
    }

    // Wrong credentials: a connect-error naming the proxy and its 407, credentials unsaid.
    let out2 = tmp.path().join("results2");
    let bad_url = format!("http://{USER}:wrong-PASSWORD-42@{}", proxy.addr);
    let args = [
        "run",
        s.to_str().unwrap(),
        "--out",
        out2.to_str().unwrap(),
        "--no-report",
    ];
    let o = tokio::time::timeout(
        BIN_LIMIT,
        bench_with_proxy_env(&args, &[("https_proxy", &bad_url)]).output(),
    )
    .await
    .unwrap()
    .unwrap();
    let (_, stderr) = texts(&o);
    assert!(!stderr.contains("wrong-PASSWORD-42"), "{stderr}");
    let dir2 = only_run(&out2);
    let r = csv_maps(&dir2.join("requests.csv"));
    assert!(!r.is_empty());
    for x in &r {
        assert_eq!(x["outcome"], "connect-error", "{x:?}");
        assert!(
            x["error"].contains(&format!("proxy http://{}", proxy.addr))
                && x["error"].contains("407"),
            "{x:?}"
        );
    }
    for p in walk(&dir2) {
        assert!(
            !contains(&std::fs::read(&p).unwrap(), b"wrong-PASSWORD-42"),
            "{}",
            p.display()
        );
    }

    // NO_PROXY naming the target's address: straight there, no tunnel.
    let before = proxy.tunnels();
    let out3 = tmp.path().join("results3");
    let args = [
        "run",
        s.to_str().unwrap(),
        "--out",
        out3.to_str().unwrap(),
        "--no-report",
    ];
    let o = tokio::time::timeout(
        BIN_LIMIT,
        bench_with_proxy_env(
            &args,
            &[
                ("HTTPS_PROXY", &proxy_url),
                ("no_proxy", "localhost,127.0.0.0/8"),
            ],
        )
        .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", texts(&o).1);
    let r = csv_maps(&only_run(&out3).join("requests.csv"));
    assert!(r
        .iter()
        .all(|x| x["outcome"] == "ok" && x["proxy_connect_ns"].is_empty()));
    assert_eq!(proxy.tunnels(), before);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_targets_proxy_key_tunnels_plain_http_too_and_a_refusal_is_a_connect_error() {
    let tmp = testkit::tempdir().unwrap();
    let sim = sim::spawn(SimConfig::new(sim::Profile::builtin("wafer").unwrap()))
        .await
        .unwrap();
    let proxy = TestProxy::spawn(None).await;
    let s = corp_scenario(
        tmp.path(),
        "plain.toml",
        &sim.base_url,
        r#""http", "http-pooled", "http2", "ws""#,
        &format!("proxy = \"http://{}\"", proxy.addr),
    );
    let done = run(&s, &tmp.path().join("r1")).await.unwrap();
    let r = rows(&done);
    assert!(r.iter().all(|x| x["outcome"] == "ok"), "{:?}", outcomes(&r));
    let opened: HashSet<_> = r
        .iter()
        .filter(|x| x["connection_reused"] == "false")
        .map(|x| {
            assert!(!x["proxy_connect_ns"].is_empty(), "{x:?}");
            x["connection_id"].clone()
        })
        .collect();
    assert_eq!(proxy.tunnels(), opened.len() + probes(&done.dir));

    // A proxy that wants credentials it does not get answers 407.
    let strict = TestProxy::spawn(Some("Basic eDp5".into())).await;
    let s = corp_scenario(
        tmp.path(),
        "strict.toml",
        &sim.base_url,
        r#""http-pooled""#,
        &format!("proxy = \"http://{}\"", strict.addr),
    );
    let refused = run(&s, &tmp.path().join("r2")).await.unwrap();
    let r = rows(&refused);
    assert!(!r.is_empty());
    for x in &r {
        assert_eq!(x["outcome"], "connect-error", "{x:?}");
        assert!(
            x["error"].contains(&format!("proxy http://{}", strict.addr))
                && x["error"].contains("HTTP 407")
                && x["error"].contains("HTTPS_PROXY"),
            "{x:?}"
        );
    }
    assert_eq!(strict.tunnels(), 0);
    sim.shutdown().await;
}
