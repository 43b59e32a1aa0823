//! `spark-bench serve`: runs the embedded simulator as a standalone server.

use std::io::Write;

use crate::cli::ServeArgs;
use crate::sim::{self, Profile, SimConfig};

/// Executes `spark-bench serve`; returns the exit code.
pub async fn execute(args: ServeArgs) -> anyhow::Result<u8> {
    let profile = match &args.profile_file {
        Some(path) => Profile::from_toml_file(path, &args.profile)?,
        None => Profile::builtin(&args.profile).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown --profile {:?}; built-ins: {} (or pass --profile-file FILE)",
                args.profile,
                Profile::builtin_names().join(", ")
            )
        })?,
    };
    let mut cfg = SimConfig::new(profile);
    cfg.seed = args.seed;
    cfg.ws_lifetime = args.ws_lifetime;
    if let Some(link) = args.link {
        cfg.link = link;
    }
    if args.tls {
        cfg.tls = Some(crate::tls::SelfSigned::generate()?);
    }
    // Every connection holds a descriptor: a soft limit of 1024 would cap the server at
    // about a thousand WebSocket sessions.
    let fds = match args.max_open_files {
        Some(n) => crate::runner::resources::cap_nofile(n),
        None => crate::runner::resources::raise_nofile(),
    };
    let listener = listen(&args.listen, args.reuse_port)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on --listen {}: {e}", args.listen))?;
    let addr = listener.local_addr()?;
    if args.reuse_port || args.max_open_files.is_some() {
        errln!(
            "listening on {addr}{}; open-file limit {} (hard {})",
            if args.reuse_port {
                " with SO_REUSEPORT (other `serve --reuse-port` processes on it share its connections)"
            } else {
                ""
            },
            fds.granted,
            fds.hard
        );
    }
    let scheme = if args.tls { "https" } else { "http" };
    let base = format!("{scheme}://{addr}/v1");
    // Printing is best effort: a closed stdout (e.g. a parent that read the URL and went
    // away) must not stop the server.
    // The certificate file first: it must exist even when nobody reads what is printed.
    // Removed when the server stops (the guard's drop).
    let pem = match &cfg.tls {
        Some(cert) => Some(PemFile::create(&cert.cert_pem)?),
        None => None,
    };
    let _ = print_banner(&cfg, &base, pem.as_ref().map(|p| p.path.as_path()));
    let served = sim::serve(listener, cfg, async {
        // Ctrl-C or SIGTERM: stop, and remove the certificate file.
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async {
                match term.as_mut() {
                    Some(t) => { t.recv().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {}
        }
    })
    .await;
    drop(pem);
    served?;
    Ok(super::EXIT_OK)
}

/// Binds `spec` (`HOST:PORT`). With `reuse_port`, SO_REUSEPORT is set, so several `serve`
/// processes can listen on one port and the kernel spreads new connections among them
/// (each process then holds only its share of the open connections).
/// Tries each address `spec` resolves to, as `TcpListener::bind` does.
async fn listen(spec: &str, reuse_port: bool) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(spec).await? {
        match listen_on(addr, reuse_port) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to bind")
    }))
}

fn listen_on(
    addr: std::net::SocketAddr,
    reuse_port: bool,
) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    // The kernel caps the backlog at net.core.somaxconn.
    socket.listen(4096)
}

/// The simulator's certificate in a file for clients (`curl --cacert`): in a directory of
/// its own with an unpredictable name, created with mode 0700 (`mkdir` fails rather than
/// reuse anything already there, and does not follow a planted symlink), the file created
/// with `O_EXCL` and mode 0600. Both are removed on drop.
struct PemFile {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl PemFile {
    fn create(pem: &str) -> anyhow::Result<PemFile> {
        use std::hash::{BuildHasher, Hasher};
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let base = std::env::temp_dir();
        let mut last_err = None;
        for attempt in 0..16u64 {
            // RandomState is seeded by the OS per process: an unpredictable name.
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(attempt);
            h.write_u32(std::process::id());
            let dir = base.join(format!("spark-bench-sim-{:016x}", h.finish()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let path = dir.join("cert.pem");
                    let guard = PemFile {
                        dir,
                        path: path.clone(),
                    };
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .custom_flags(crate::sys::fs::O_NOFOLLOW)
                        .open(&path)
                        .map_err(|e| {
                            anyhow::anyhow!("cannot create {}: {e}", path.display())
                        })?;
                    f.write_all(pem.as_bytes()).map_err(|e| {
                        anyhow::anyhow!("cannot write the certificate to {}: {e}", path.display())
                    })?;
                    return Ok(guard);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last_err = Some(e),
                Err(e) => {
                    return Err(anyhow::anyhow!(
                        "cannot create a private directory for the certificate in {}: {e}; set TMPDIR to a writable directory",
                        base.display()
                    ))
                }
            }
        }
        Err(anyhow::anyhow!(
            "cannot create a private directory for the certificate in {}: {}",
            base.display(),
            last_err.map(|e| e.to_string()).unwrap_or_default()
        ))
    }
}

impl Drop for PemFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn print_banner(cfg: &SimConfig, base: &str, pem: Option<&std::path::Path>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "spark-bench simulator (profile {}) listening on {base}",
        cfg.profile.name
    )?;
    if let Some(path) = pem {
        writeln!(out, "certificate (PEM): {}", path.display())?;
        writeln!(
            out,
            "try: curl --cacert {} -N {base}/chat/completions -H 'content-type: application/json' \
             -d '{{\"model\":\"sim\",\"stream\":true,\"messages\":[{{\"role\":\"user\",\"content\":\"Write a snake game\"}}]}}'",
            path.display()
        )?;
    } else {
        writeln!(
            out,
            "try: curl -N {base}/chat/completions -H 'content-type: application/json' \
             -d '{{\"model\":\"sim\",\"stream\":true,\"messages\":[{{\"role\":\"user\",\"content\":\"Write a snake game\"}}]}}'"
        )?;
    }
    out.flush()?;
    Ok(())
}
