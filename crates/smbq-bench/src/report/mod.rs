//! Results: results.json (numbers, versions, settings, machine), results.md (tables and the
//! ratio table), and each study figure as SVG and as PNG.

pub mod figure;
pub mod markdown;
pub mod plots;
pub mod ratios;

use std::path::Path;

use crate::scenarios::fio::FioRow;
use crate::scenarios::loss::LossRow;
use crate::scenarios::raw::RawRow;
use crate::scenarios::setup::SetupRow;
use crate::scenarios::sweep::SweepRow;

#[derive(Debug, Default, serde::Serialize)]
pub struct Results {
    pub raw: Option<Vec<RawRow>>,
    pub fio: Option<Vec<FioRow>>,
    pub sweep: Option<Vec<SweepRow>>,
    pub setup: Option<Vec<SetupRow>>,
    pub loss: Option<Vec<LossRow>>,
    pub interactive: Option<Vec<crate::scenarios::interactive::InteractiveRow>>,
    pub crypto: Option<Vec<crate::scenarios::crypto::CryptoRow>>,
    pub compression: Option<Vec<crate::scenarios::compression::CompressionRow>>,
    pub ca: Option<Vec<crate::scenarios::ca::CaRow>>,
    /// Scenario `cluster`: smbq alone against a cluster node (same row shape as `ca`).
    pub cluster: Option<Vec<crate::scenarios::ca::CaRow>>,
    pub get: Option<Vec<crate::scenarios::get::GetRow>>,
    /// Whether `raw` ran on loopback at smbq's default QUIC MTU bound: the conditions of
    /// issue 11's raw-QUIC goal.
    #[serde(skip)]
    pub raw_at_default_mtu_on_loopback: bool,
}

/// Everything written to the results directory.
pub struct Report<'a> {
    pub results: &'a Results,
    /// Versions, settings, machine facts, timing, errors.
    pub meta: serde_json::Value,
}

impl Report<'_> {
    /// Writes results.json, results.md and the figures (SVG and PNG); returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<String>, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let ratios = ratios::compute(self.results);
        let mut json = self.meta.clone();
        if let Some(obj) = json.as_object_mut() {
            obj.insert(
                "scenarios".into(),
                serde_json::to_value(self.results).map_err(|e| e.to_string())?,
            );
            obj.insert(
                "ratios".into(),
                serde_json::to_value(&ratios).map_err(|e| e.to_string())?,
            );
        }
        let mut written = Vec::new();
        let mut put = |name: &str, text: String| -> Result<(), String> {
            std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))?;
            written.push(name.to_string());
            Ok(())
        };
        put(
            "results.json",
            serde_json::to_string_pretty(&json).map_err(|e| e.to_string())? + "\n",
        )?;
        put(
            "results.md",
            markdown::render(self.results, &ratios, &self.meta),
        )?;
        for (name, bytes) in plots::all(self.results)? {
            std::fs::write(dir.join(&name), bytes).map_err(|e| format!("{name}: {e}"))?;
            written.push(name);
        }
        Ok(written)
    }
}
