//! Routes as people write them: `torch->jax`, `torch -> jax -> tf`, `->jax` (from whatever the
//! array is), and with the arrow gpushare prints, `torch→jax`. The one parser of routes: the
//! magics, `share_chain`, the command line's `bench SRC->DST` and the cost model's labels read them
//! here. Which names are frameworks is the adapters' to say, so only the shape is checked here.

/// The arrows a route may be written with: the typed one and the one gpushare's output shows.
pub const ARROWS: [&str; 2] = ["->", "→"];

/// A pair as gpushare writes it (`torch → jax`): tables, titles, warnings and error subjects, and
/// what [`Route::parse`] reads back.
pub fn label(source: &str, target: &str) -> String {
    format!("{source} {} {target}", ARROWS[1])
}

/// A parsed route: the source (None for `->jax`) and one or more targets, each trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub source: Option<String>,
    pub targets: Vec<String>,
}

impl Route {
    /// `SRC->DST[->DST2…]` or `->DST[…]`, with or without spaces around the arrows.
    pub fn parse(text: &str) -> Result<Route, String> {
        let mut parts = split(text).into_iter();
        let source = parts.next().unwrap_or_default();
        let targets: Vec<String> = parts.collect();
        if targets.is_empty() || targets.iter().any(String::is_empty) {
            return Err(format!("expected SRC->DST[->DST2…] or ->DST, got {text:?}"));
        }
        Ok(Route { source: (!source.is_empty()).then_some(source), targets })
    }

    /// Exactly `SRC->DST`: one source, one target.
    pub fn pair(text: &str) -> Result<(String, String), String> {
        match Route::parse(text) {
            Ok(Route { source: Some(source), mut targets }) if targets.len() == 1 => Ok((source, targets.remove(0))),
            _ => Err(format!("`{text}` is not of the form SRC->DST (e.g. torch->jax)")),
        }
    }

    /// Whether `text` holds an arrow at all (a magic line's token that is part of a route).
    pub fn has_arrow(text: &str) -> bool {
        ARROWS.iter().any(|a| text.contains(a))
    }
}

/// The names between the arrows, trimmed (empty where nothing was written).
fn split(text: &str) -> Vec<String> {
    text.replace(ARROWS[1], ARROWS[0]).split(ARROWS[0]).map(|p| p.trim().to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(source: Option<&str>, targets: &[&str]) -> Route {
        Route { source: source.map(str::to_owned), targets: targets.iter().map(|t| t.to_string()).collect() }
    }

    #[test]
    fn both_arrows_spaces_and_chains_read_alike() {
        for text in ["torch->jax", "torch -> jax", " torch->  jax ", "torch→jax", "torch → jax"] {
            assert_eq!(Route::parse(text), Ok(route(Some("torch"), &["jax"])), "{text}");
        }
        assert_eq!(Route::parse("torch->jax→tf"), Ok(route(Some("torch"), &["jax", "tf"])));
        assert_eq!(Route::parse("->jax"), Ok(route(None, &["jax"])));
        assert_eq!(Route::parse("→ jax"), Ok(route(None, &["jax"])));
    }

    #[test]
    fn a_route_without_a_target_is_refused_saying_how_to_write_one() {
        for bad in ["torch", "torch->", "torch->->jax", "->", "", "torch-", "torch=>jax"] {
            let e = Route::parse(bad).unwrap_err();
            assert!(e.contains("expected SRC->DST"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_pair_is_one_source_and_one_target() {
        assert_eq!(Route::pair("pt -> np"), Ok(("pt".into(), "np".into())));
        assert_eq!(Route::pair("torch→tf"), Ok(("torch".into(), "tf".into())));
        for bad in ["->jax", "torch->jax->tf", "torch"] {
            assert!(Route::pair(bad).unwrap_err().contains("not of the form SRC->DST"), "{bad}");
        }
        assert_eq!(Route::pair(&label("torch", "jax")), Ok(("torch".into(), "jax".into())));
        assert!(Route::has_arrow("x→") && Route::has_arrow("->tf") && !Route::has_arrow("torch-"));
    }
}
