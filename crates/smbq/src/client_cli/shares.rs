//! `shares`: what NetrShareEnum (MS-SRVS 3.1.4.8) reports, one share per line.

use std::io::Write;

use smbq_client::ShareInfo1;

use super::Command;
use super::args::{ConnArgs, Transport};
use super::connect::Connector;
use super::each;
use super::exit::CliError;
use super::simple::stdout_error;
use super::url::{SmbUrl, parse_url};

#[derive(clap::Args)]
pub struct SharesArgs {
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::SERVER_URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for SharesArgs {
    const NAME: &'static str = "shares";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        run(self, c).await
    }
}

/// `Disk`, `Printer`, `Device`, `IPC` (MS-SRVS 2.2.2.4), `,special` for administrative shares.
pub fn type_name(s: &ShareInfo1) -> String {
    let base = match s.base_type() {
        0 => "Disk".to_string(),
        1 => "Printer".to_string(),
        2 => "Device".to_string(),
        3 => "IPC".to_string(),
        n => format!("Type{n}"),
    };
    if s.is_special() {
        format!("{base},special")
    } else {
        base
    }
}

/// `NAME  TYPE  COMMENT`, columns padded to the longest name and type.
pub fn table(shares: &[ShareInfo1]) -> String {
    let types: Vec<String> = shares.iter().map(type_name).collect();
    let nw = shares
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    let tw = types.iter().map(String::len).max().unwrap_or(0);
    let mut out = String::new();
    for (s, t) in shares.iter().zip(&types) {
        let line = format!("{:<nw$}  {:<tw$}  {}", s.name, t, s.comment);
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

async fn run(a: SharesArgs, c: &mut Connector) -> Result<(), CliError> {
    each(a.urls, async |u: SmbUrl| {
        let at = |e: CliError| e.at("shares", &u.raw);
        let mut list = list_shares(c, &u).await.map_err(at)?;
        list.sort_by_key(|x| x.name.to_lowercase());
        let mut out = std::io::stdout().lock();
        out.write_all(table(&list).as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| at(stdout_error(e)))
    })
    .await
}

/// The share list (srvsvc over a named pipe). Servers refuse named pipes over QUIC by
/// default (Windows' RestrictNamedpipeAccessViaQuic, smbq's `[quic] restrict_named_pipes`):
/// when the transport was not forced, a list refused over QUIC is asked again over TCP.
async fn list_shares(c: &mut Connector, u: &SmbUrl) -> Result<Vec<ShareInfo1>, CliError> {
    let session = c.session(u).await?;
    let quic = session.client().transport() == smbq_transport::TransportKind::Quic;
    let e = match session.shares().await {
        Ok(list) => return Ok(list),
        Err(e) => e,
    };
    let denied = matches!(&e, smbq_client::Error::Status { status, .. }
        if *status == smbq_wire::NtStatus::ACCESS_DENIED);
    if !(quic && denied) {
        return Err(e.into());
    }
    if c.args().transport.is_some() {
        return Err(CliError::from(e)
            .note("servers refuse named pipes (the share list) over QUIC by default; list the shares over TCP"));
    }
    let mut args = c.args().clone();
    args.transport = Some(Transport::Tcp);
    let mut tcp = Connector::new(args)?;
    let session = tcp.session(u).await?;
    session
        .shares()
        .await
        .map_err(|e| CliError::from(e).note("refused over QUIC (named pipes), then over TCP"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(name: &str, t: u32, comment: &str) -> ShareInfo1 {
        ShareInfo1 {
            name: name.into(),
            share_type: t,
            comment: comment.into(),
        }
    }

    #[test]
    fn table_lines() {
        let t = table(&[
            share("share", 0, "files"),
            share("IPC$", 3 | 0x8000_0000, "IPC Service"),
            share("nocomment", 0, ""),
        ]);
        assert_eq!(
            t,
            "share      Disk         files\nIPC$       IPC,special  IPC Service\nnocomment  Disk\n"
        );
    }
}
