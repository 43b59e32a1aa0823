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
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on --listen {}: {e}", args.listen))?;
    let addr = listener.local_addr()?;
    let scheme = if args.tls { "https" } else { "http" };
    let base = format!("{scheme}://{addr}/v1");
    // Printing is best effort: a closed stdout (e.g. a parent that read the URL and went
    // away) must not stop the server.
    let _ = print_banner(&cfg, &addr, &base, args.tls);
    sim::serve(listener, cfg, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(super::EXIT_OK)
}

fn print_banner(
    cfg: &SimConfig,
    addr: &std::net::SocketAddr,
    base: &str,
    tls: bool,
) -> anyhow::Result<()> {
    let _ = tls;
    // The certificate file first: it must exist even when nobody reads what is printed.
    let pem = match &cfg.tls {
        Some(cert) => {
            let path = std::env::temp_dir().join(format!("spark-bench-sim-{}.pem", addr.port()));
            std::fs::write(&path, &cert.cert_pem).map_err(|e| {
                anyhow::anyhow!("cannot write the certificate to {}: {e}", path.display())
            })?;
            Some(path)
        }
        None => None,
    };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "spark-bench simulator (profile {}) listening on {base}",
        cfg.profile.name
    )?;
    if let Some(path) = &pem {
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
