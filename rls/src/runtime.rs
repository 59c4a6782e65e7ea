//! The configuration files, read as the reference's runtime reads them:
//! every file under RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY
//! (dot files skipped with RUNTIME_IGNOREDOTFILES), looked at again every
//! second and loaded anew when any changed. A set that does not load keeps
//! the configuration in force, and says why.

use std::path::{Path, PathBuf};

/// Every regular file under `dir`, by path, with its contents, in path
/// order (links followed, so a swapped link shows its new target).
pub fn read_files(dir: &Path, ignore_dot_files: bool) -> std::io::Result<Vec<(String, String)>> {
    let mut paths = Vec::new();
    collect(dir, ignore_dot_files, &mut paths)?;
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path)?;
            Ok((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ))
        })
        .collect()
}

fn collect(dir: &Path, ignore_dot_files: bool, into: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let dotted = entry.file_name().to_string_lossy().starts_with('.');
        if ignore_dot_files && dotted {
            continue;
        }
        let path = entry.path();
        let kind = std::fs::metadata(&path)?;
        if kind.is_dir() {
            collect(&path, ignore_dot_files, into)?;
        } else if kind.is_file() {
            into.push(path);
        }
    }
    Ok(())
}
