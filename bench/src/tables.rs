//! The Markdown tables of one backend.

use std::fmt::Write as _;

use crate::cpu::CpuUse;
use crate::dblimit::Shape;
use crate::report::{BackendReport, GROUPED, PER_TRANSACTION, rows_label};
use crate::stats::Summary;

fn rate(s: Option<&Summary>) -> String {
    s.map_or("–".to_owned(), |s| format!("{:.0}", s.per_second))
}

fn latencies(s: Option<&Summary>) -> String {
    s.map_or("– | – | –".to_owned(), |s| {
        format!("{:.2} | {:.2} | {:.2}", s.p50_ms, s.p99_ms, s.p999_ms)
    })
}

fn share(s: Option<&Summary>, limit: Option<&Summary>) -> String {
    match (s, limit) {
        (Some(s), Some(l)) if l.per_second > 0.0 => {
            format!("{:.0}%", 100.0 * s.per_second / l.per_second)
        }
        _ => "–".to_owned(),
    }
}

fn errors(s: Option<&Summary>) -> u64 {
    s.map_or(0, |s| s.errors)
}

/// Every table of `b`.
#[must_use]
pub fn backend(b: &BackendReport) -> String {
    let mut md = format!("### {} ({}, {})\n\n", b.backend, b.version, b.database);
    for problem in &b.problems {
        let _ = writeln!(md, "**Failed:** {problem}\n");
    }
    md.push_str(&consume(b));
    md.push_str(&crate::team::table(b));
    md.push_str(&crate::limits::table(b));
    md.push_str(&crate::usage::table(b));
    md.push_str(&cpu(b));
    md.push_str(&webhooks(b));
    md.push_str(&deliveries(b));
    md.push_str(&growth(b));
    md.push_str(&crate::admin_console::table(b));
    md.push_str(&service(b));
    md
}

fn consume(b: &BackendReport) -> String {
    let mut md = String::from(
        "Consume: the database's own limit (the store's consume transaction through sqlx) and \
         `POST /api/credits/consume` over HTTP, one transaction per request and with group \
         commit (req/s, latencies in ms, % of the limit at the same client count).\n\n\
         | clients | DB limit tx/s | per-tx req/s | p50 | p99 | p99.9 | % of limit | grouped \
         req/s | p50 | p99 | p99.9 | % of limit | errors |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut points: Vec<(usize, bool)> = b
        .consume
        .iter()
        .map(|r| (r.clients, r.hot))
        .chain(b.db_limit.iter().map(|r| (r.clients, r.hot)))
        .collect();
    points.sort_unstable();
    points.dedup();
    for (clients, hot) in points {
        let limit = b.limit(clients, hot);
        let per_tx = b.http(PER_TRANSACTION, clients, hot);
        let grouped = b.http(GROUPED, clients, hot);
        let label = if hot {
            format!("{clients}, one account")
        } else {
            clients.to_string()
        };
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} | {} | {} | {} | {} |",
            rate(limit),
            rate(per_tx),
            latencies(per_tx),
            share(per_tx, limit),
            rate(grouped),
            latencies(grouped),
            share(grouped, limit),
            errors(limit) + errors(per_tx) + errors(grouped)
        );
    }
    for row in &b.db_limit {
        let s = &row.summary;
        if row.shape == Shape::Core {
            let _ = writeln!(
                md,
                "\nThe decrement and the ledger insert alone (no key lookup, no lot draw-down) \
                 reach {:.0} tx/s at {} workers (p50 {:.2} ms, p99 {:.2} ms).",
                s.per_second, row.clients, s.p50_ms, s.p99_ms
            );
        } else if row.connections == 1 {
            let _ = writeln!(
                md,
                "\nThe store's transaction from {} workers through ONE connection (writers queue \
                 in the pool instead of in SQLite's busy handler): {:.0} tx/s, p50 {:.2} ms, p99 \
                 {:.2} ms, p99.9 {:.2} ms.",
                row.clients, s.per_second, s.p50_ms, s.p99_ms, s.p999_ms
            );
        }
    }
    md.push('\n');
    md
}

/// One CPU row: µs of CPU per operation by process group, and the rest of the machine.
fn cpu_row(label: &str, s: &Summary, cpu: Option<&CpuUse>) -> Option<String> {
    let cpu = cpu?;
    let ops = s.ok as f64;
    if ops == 0.0 || cpu.seconds <= 0.0 {
        return None;
    }
    let per_op = |ms: f64| format!("{:.0}", ms * 1000.0 / ops);
    Some(format!(
        "| {label} | {:.0} | {} | {} | {} | {:.2} | {:.0}% |",
        s.per_second,
        per_op(cpu.service_ms),
        per_op(cpu.postgres_ms),
        per_op(cpu.bench_ms),
        cpu.others_ms / 1000.0 / cpu.seconds,
        cpu.machine_busy_pct
    ))
}

fn cpu(b: &BackendReport) -> String {
    let mut md = String::from(
        "Where the CPU went during each measured window: CPU µs per operation in the service \
         (with SQLite, the database's work is in it), in PostgreSQL's processes and in the \
         benchmark's clients; CPUs' worth of time used by every other process (other work on \
         the machine); how busy the machine was.\n\n\
         | point | ops/s | service µs/op | PostgreSQL µs/op | benchmark µs/op | other processes \
         (CPUs) | machine busy |\n|---|---|---|---|---|---|---|\n",
    );
    let mut rows = Vec::new();
    for r in &b.db_limit {
        let label = format!(
            "DB limit {:?}, {} workers{}{}",
            r.shape,
            r.clients,
            if r.hot { ", one account" } else { "" },
            if r.connections == 1 {
                ", 1 connection"
            } else {
                ""
            }
        );
        rows.extend(cpu_row(&label, &r.summary, r.cpu.as_ref()));
    }
    for r in &b.consume {
        let label = format!(
            "HTTP {}, {} clients{}",
            r.mode,
            r.clients,
            if r.hot { ", one account" } else { "" }
        );
        rows.extend(cpu_row(&label, &r.summary, r.cpu.as_ref()));
    }
    if rows.is_empty() {
        return String::new();
    }
    for row in rows {
        let _ = writeln!(md, "{row}");
    }
    md.push('\n');
    md
}

fn deliveries(b: &BackendReport) -> String {
    if b.deliveries.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "Host events (`credits.granted`) written in one burst and delivered, signed, to a local \
         receiver that answers 204:\n\n\
         | events | concurrent deliveries | seconds | events/s | extra requests |\n\
         |---|---|---|---|---|\n",
    );
    for row in &b.deliveries {
        let _ = writeln!(
            md,
            "| {} | {} | {:.2} | {:.0} | {} |",
            row.events, row.concurrency, row.seconds, row.per_second, row.extra_requests
        );
    }
    md.push('\n');
    md
}

fn webhooks(b: &BackendReport) -> String {
    if b.webhooks.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "Signed webhooks (payment succeeded), each for its own pending order; each order of a \
         `distinct` point has a buyer of its own, every order of a `one` point the same buyer:\n\n\
         | mode | provider | clients | buyers | webhooks | req/s | p50 | p99 | p99.9 | errors |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in &b.webhooks {
        let s = &row.summary;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.0} | {} | {} |",
            row.mode,
            row.provider,
            row.clients,
            row.buyers,
            s.ok + s.errors,
            s.per_second,
            latencies(Some(s)),
            s.errors
        );
    }
    for v in &b.webhook_checks {
        let _ = writeln!(
            md,
            "\n{}: {} delivered to {} buyers, {} orders paid, {} grants for {} orders, {} delivered \
             again; granted exactly once: **{}**; every buyer's ledger adds up: **{}**.",
            v.mode,
            v.delivered,
            v.buyers,
            v.paid_orders,
            v.grants,
            v.granted_orders,
            v.redelivered,
            if v.granted_once { "yes" } else { "NO" },
            if v.ledger_consistent { "yes" } else { "NO" }
        );
    }
    md.push('\n');
    md
}

fn growth(b: &BackendReport) -> String {
    if b.growth.is_empty() {
        return String::new();
    }
    let mut sizes: Vec<i64> = b.growth.iter().map(|r| r.rows).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut md = String::from("Reads as the ledger grows (one client, ms):\n\n| read |");
    for rows in &sizes {
        let _ = write!(md, " p50 at {0} | p99 at {0} |", rows_label(*rows));
    }
    md.push_str(" ratio of p50s |\n|---|");
    md.push_str(&"---|---|".repeat(sizes.len()));
    md.push_str("---|\n");
    for (endpoint, _) in crate::reads::ENDPOINTS {
        let _ = write!(md, "| {endpoint} |");
        let medians: Vec<f64> = sizes
            .iter()
            .filter_map(|rows| {
                let s = &b
                    .growth
                    .iter()
                    .find(|r| r.rows == *rows && r.endpoint == endpoint)?
                    .summary;
                let _ = write!(md, " {:.3} | {:.3} |", s.p50_ms, s.p99_ms);
                Some(s.p50_ms)
            })
            .collect();
        let ratio = match (medians.first(), medians.last()) {
            (Some(a), Some(z)) if *a > 0.0 => format!("{:.2}x", z / a),
            _ => "–".to_owned(),
        };
        let _ = writeln!(md, " {ratio} |");
    }
    for s in &b.seeded {
        let _ = write!(
            md,
            "\nInserting the {}-row ledger took {:.1} s.",
            rows_label(s.rows),
            s.seconds
        );
    }
    md.push_str("\n\n");
    md
}

fn service(b: &BackendReport) -> String {
    let mut md = String::from("| service | figure |\n|---|---|\n");
    for s in &b.startup {
        let _ = writeln!(
            md,
            "| start-up to ready, {} ({}) | {:.0} ms |",
            s.mode, s.database, s.ms
        );
    }
    for m in &b.memory {
        let _ = writeln!(
            md,
            "| resident memory, {} instance: idle / peak under load / idle after | {:.1} / {:.1} \
             / {:.1} MiB |",
            m.mode, m.idle_mb, m.peak_load_mb, m.idle_after_load_mb
        );
    }
    if let Some(p) = &b.pages {
        let _ = writeln!(
            md,
            "| GET {} (p50 / p99) | {:.3} / {:.3} ms |",
            p.path, p.summary.p50_ms, p.summary.p99_ms
        );
        if let Some(note) = &p.note {
            let _ = writeln!(md, "\n{note}.");
        }
    }
    md.push('\n');
    md
}
