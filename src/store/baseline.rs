//! Named baselines: `results/baselines/<name>/`, a full copy of a run directory, so the CI
//! gate can compare against it after the original run is deleted.

use std::path::{Path, PathBuf};

use super::{check_name, Result, StoreError, MANIFEST_FILE};

/// `baselines/` under the results root.
pub const BASELINES_DIR: &str = "baselines";

/// Copies `run_dir` to `results_root/baselines/<name>/`, replacing an older baseline of
/// that name. The copy is assembled in a temporary directory and renamed into place.
pub fn save_baseline(results_root: &Path, run_dir: &Path, name: &str) -> Result<PathBuf> {
    check_name("baseline", name)?;
    if !is_run_or_set(run_dir) {
        return Err(StoreError::NotARun {
            path: run_dir.to_path_buf(),
        });
    }
    let base = results_root.join(BASELINES_DIR);
    std::fs::create_dir_all(&base).map_err(|source| StoreError::CreateDir {
        path: base.clone(),
        source,
    })?;
    let dest = base.join(name);
    let tmp = base.join(format!(".{name}.tmp-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|source| StoreError::Write {
            path: tmp.clone(),
            source,
        })?;
    }
    copy_dir(run_dir, &tmp)?;
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|source| StoreError::Write {
            path: dest.clone(),
            source,
        })?;
    }
    std::fs::rename(&tmp, &dest).map_err(|source| StoreError::Write {
        path: dest.clone(),
        source,
    })?;
    Ok(dest)
}

/// Finds a run: `path_or_name` itself when it is a results directory, else the baseline
/// `results_root/baselines/<name>/`, else the run `results_root/<name>/`.
pub fn resolve(results_root: &Path, path_or_name: &str) -> Result<PathBuf> {
    let as_path = PathBuf::from(path_or_name);
    let mut candidates = vec![as_path];
    if super::is_safe_name(path_or_name) {
        candidates.push(results_root.join(BASELINES_DIR).join(path_or_name));
        candidates.push(results_root.join(path_or_name));
    }
    if let Some(found) = candidates.iter().find(|c| is_run_or_set(c)) {
        return Ok(found.clone());
    }
    let known = list_baselines(results_root).unwrap_or_default();
    Err(StoreError::NotFound {
        name: path_or_name.to_string(),
        looked: candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        known: if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        },
    })
}

/// True for a results directory, or a directory of them (the repeats of `run --repeat N`).
pub fn is_run_or_set(dir: &Path) -> bool {
    dir.join(MANIFEST_FILE).is_file()
        || std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.path().join(MANIFEST_FILE).is_file())
        })
}

/// Names of the baselines under `results_root/baselines/`, sorted.
pub fn list_baselines(results_root: &Path) -> Result<Vec<String>> {
    let base = results_root.join(BASELINES_DIR);
    if !base.is_dir() {
        return Ok(Vec::new());
    }
    let rerr = |source| StoreError::Read {
        path: base.clone(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&base).map_err(rerr)? {
        let entry = entry.map_err(rerr)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if super::is_safe_name(&name) && entry.path().join(MANIFEST_FILE).is_file() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|source| StoreError::CreateDir {
        path: to.to_path_buf(),
        source,
    })?;
    let rerr = |source| StoreError::Read {
        path: from.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(from).map_err(rerr)? {
        let entry = entry.map_err(rerr)?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let ty = entry.file_type().map_err(rerr)?;
        if ty.is_dir() {
            copy_dir(&src, &dst)?;
        } else if ty.is_file() {
            std::fs::copy(&src, &dst).map_err(|source| StoreError::Write {
                path: dst.clone(),
                source,
            })?;
        }
    }
    Ok(())
}
