//! The `/mesh` page in a real browser: three sites' agents, each with a
//! history of known results, read each other's rows; Debian's chromium
//! (headless) draws the page served by one of them, and every shade of
//! the grid must be on the screenshot in its colour. Skipped when
//! chromium is missing, unless `TIGHTLINK_REQUIRE_CHROMIUM` is set (CI
//! sets it). `TIGHTLINK_MESH_SCREENSHOT=FILE` keeps the screenshot.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tightlink_agent::grid::Shade;
use tightlink_agent::http;
use tightlink_agent::store::Origin;
use tightlink_agent::{config, Agent, Overrides, Row, Store};
use tightlink_measure::{ErrorKind, Target};

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(PathBuf::from)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An answer (available, high end; `None`: at least) or why it failed.
type Answer = Result<(f64, Option<f64>), &'static str>;

/// A stored result of `from`'s agent toward the site `to` at `address`.
fn row(to: &str, address: &str, age_s: i64, result: Answer) -> Row {
    let target = Target::parse(address).unwrap();
    let origin = Origin {
        name: to,
        target: &target,
        method: "auto",
        origin: "schedule",
        started_unix_ns: tightlink_agent::agent::unix_ns() - age_s * 1_000_000_000,
        wall_s: 1.0,
        seed: None,
    };
    match result {
        Err(why) => Row::failure(&origin, why, ErrorKind::Unreachable),
        Ok((available, high)) => Row {
            ok: true,
            available_bps: Some(available),
            low_bps: Some(available * 0.95),
            high_bps: high,
            bound: Some("exact".into()),
            error: None,
            error_kind: None,
            report: Some("{}".into()),
            ..Row::failure(&origin, "", ErrorKind::Io)
        },
    }
}

fn rgb(hex: &str) -> [u8; 3] {
    let v = u32::from_str_radix(hex.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// Pixels of each colour in a PNG.
fn pixels_of(png_file: &Path, colours: &[[u8; 3]]) -> Vec<usize> {
    let decoder = png::Decoder::new(std::fs::File::open(png_file).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => panic!("a screenshot in {other:?}"),
    };
    let mut counts = vec![0; colours.len()];
    for px in buf[..info.buffer_size()].chunks(step) {
        if let Some(i) = colours.iter().position(|c| px[..3] == c[..]) {
            counts[i] += 1;
        }
    }
    counts
}

#[test]
fn the_mesh_page_draws_every_shade_in_a_browser() {
    let Some(browser) = chromium() else {
        if std::env::var_os("TIGHTLINK_REQUIRE_CHROMIUM").is_some() {
            panic!("the browser test is required but chromium is not installed");
        }
        eprintln!("skipped: no chromium (Debian package `chromium`)");
        return;
    };
    // Every turn of a daily mesh is in its first minute (UTC): keep out
    // of it, so no real measurement replaces a known result.
    let into_day = tightlink_agent::agent::unix_ns() / 1_000_000_000 % 86_400;
    if into_day < 120 {
        std::thread::sleep(Duration::from_secs(125 - into_day as u64));
    }
    let dir = tempfile::tempdir().unwrap();
    let names = ["ams", "fra", "nyc"];
    let ports: Vec<u16> = names.iter().map(|_| free_port()).collect();
    // Servers that are never reached: the results are stored beforehand.
    let address = |i: usize| format!("127.0.0.1:{}", 40_000 + i);
    let mut mesh = String::from("period = \"24h\"\nslot = \"10s\"\n");
    for (i, n) in names.iter().enumerate() {
        mesh.push_str(&format!(
            "\n[[site]]\nname = \"{n}\"\naddress = \"{}\"\nagent = \"127.0.0.1:{}\"\n{}",
            address(i),
            ports[i],
            if *n == "ams" {
                "capacity = \"10G\"\n"
            } else {
                ""
            }
        ));
    }
    std::fs::write(dir.path().join("mesh.toml"), mesh).unwrap();
    // Paths touching ams are judged against its 10 Gbit/s; fra-nyc has no
    // capacity given.
    let history: [(usize, usize, i64, Answer, Shade); 6] = [
        (0, 1, 60, Ok((8e9, Some(9e9))), Shade::Good),
        (0, 2, 60, Ok((1e9, Some(1.2e9))), Shade::Critical),
        (1, 0, 60, Ok((3e9, Some(3.5e9))), Shade::Warning),
        (1, 2, 60, Ok((2e9, None)), Shade::Unjudged),
        (2, 0, 60, Err("connection refused"), Shade::Failed),
        (2, 1, 3 * 86_400, Ok((5e8, Some(6e8))), Shade::Stale),
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let mut runs = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let db = dir.path().join(format!("{n}.db"));
        let mut store = Store::open(&db).unwrap();
        for (from, to, age, result, _) in &history {
            if *from == i {
                store
                    .insert(&row(names[*to], &address(*to), *age, *result))
                    .unwrap();
            }
        }
        drop(store);
        let cfg_file = dir.path().join(format!("{n}.toml"));
        std::fs::write(
            &cfg_file,
            format!(
                "listen = \"127.0.0.1:{}\"\ndatabase = \"{}\"\nmesh = \"mesh.toml\"\nsite = \"{n}\"\n",
                ports[i],
                db.display()
            ),
        )
        .unwrap();
        let cfg = config::load(Some(&cfg_file), &Overrides::default()).unwrap();
        let agent = Agent::new(cfg, Arc::new(|_: &str| {})).unwrap();
        let stop = stop.clone();
        runs.push(std::thread::spawn(move || {
            agent.run(&|| stop.load(Ordering::SeqCst)).unwrap()
        }));
    }
    let ams = format!("127.0.0.1:{}", ports[0]);
    // ams reads the other rows every 5 s until it has them.
    let start = Instant::now();
    let page = loop {
        let page = http::get(&ams, "/mesh", Duration::from_secs(2), 1 << 20).unwrap_or_default();
        if page.contains("<table") && !page.contains("could not be read") {
            break page;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{page}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let shades: Vec<Shade> = history.iter().map(|h| h.4).collect();
    for &shade in &shades {
        assert_eq!(
            page.matches(&format!("data-shade=\"{shade:?}\"")).count(),
            1,
            "{shade:?}: {page}"
        );
    }
    // The cells link to the measuring site's history of that path.
    let fra_port = ports[1];
    assert!(
        page.contains(&format!(
            "href=\"http://127.0.0.1:{fra_port}/history?target=ams\""
        )),
        "{page}"
    );
    let fra_history = http::get(
        &format!("127.0.0.1:{fra_port}"),
        "/history?target=ams",
        Duration::from_secs(2),
        1 << 20,
    )
    .unwrap();
    assert!(
        fra_history.contains("<svg") && fra_history.contains("1 answers"),
        "{fra_history}"
    );
    // The browser's picture of it.
    let shot = std::env::var_os("TIGHTLINK_MESH_SCREENSHOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().join("mesh.png"));
    let out = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-color-profile=srgb",
            "--window-size=700,460",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("http://{ams}/mesh"))
        .output()
        .unwrap();
    stop.store(true, Ordering::SeqCst);
    for r in runs {
        r.join().unwrap();
    }
    assert!(
        shot.exists(),
        "chromium made no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let colours: Vec<[u8; 3]> = shades.iter().map(|s| rgb(s.colour())).collect();
    let counts = pixels_of(&shot, &colours);
    // A cell is 110 x 44 pixels, some of it text; a legend swatch 18 x
    // 14: each colour must fill about a cell, not only its swatch.
    for (s, n) in shades.iter().zip(&counts) {
        assert!(
            *n > 2500,
            "{s:?} ({}): {n} pixels; all: {counts:?}",
            s.colour()
        );
    }
}
