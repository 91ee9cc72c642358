//! [F-SCOPE] Where an isolate reports: its region's coordinator (ADR 011, "Topology and
//! budget"). The region is one of the Durable Objects' location hints, picked from the
//! request's `cf` fields — the platform's, never the client's — at the isolate's first
//! request and kept for its life: an isolate runs in one data centre, and an isolate that
//! moved would count in two regions' windows (and twice in the global merge) until the
//! first forgot it.
//!
//! The mapping, from `cf.continent`, `cf.country` and `cf.longitude` (the client's, which is
//! near the data centre that runs the isolate):
//! - North America (`NA`): west of 100° W `wnam`, else `enam` (no longitude: `enam`);
//! - South America (`SA`): `sam`;
//! - Europe (`EU`): the countries east of the former inner-German border and the Balkans
//!   ([`EASTERN_EUROPE`]) `eeur`, the rest `weur`;
//! - Asia (`AS`): the Middle East and the Caucasus ([`MIDDLE_EAST`]) `me`, the rest `apac`;
//! - Oceania (`OC`) and Antarctica (`AN`): `oc`; Africa (`AF`): `afr`.
//!
//! No `cf` (a local runtime with no cf blob), or a continent the platform does not name
//! (`T1`, Tor): [`DEFAULT_REGION`].

/// A region: one coordinator per service, settings and region, created with the region's
/// name as its Durable Object location hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Region {
    Wnam,
    Enam,
    Sam,
    Weur,
    Eeur,
    Apac,
    Oc,
    Afr,
    Me,
}

/// The region of an isolate whose requests carry no `cf` (a local runtime).
pub const DEFAULT_REGION: Region = Region::Enam;

/// Every region, in the order `drill --regions R` takes the first R (the busiest first, as
/// the scale runs' shares have them: docs/fleet.md).
pub const REGIONS: [Region; 9] = [
    Region::Enam,
    Region::Weur,
    Region::Apac,
    Region::Wnam,
    Region::Eeur,
    Region::Sam,
    Region::Oc,
    Region::Me,
    Region::Afr,
];

/// European countries whose coordinator is `eeur` (ISO 3166-1 alpha-2).
pub const EASTERN_EUROPE: &[&str] = &[
    "AL", "BA", "BG", "BY", "CY", "CZ", "EE", "GR", "HR", "HU", "LT", "LV", "MD", "ME", "MK", "PL",
    "RO", "RS", "RU", "SI", "SK", "UA", "XK",
];

/// Asian countries whose coordinator is `me`.
pub const MIDDLE_EAST: &[&str] = &[
    "AE", "AM", "AZ", "BH", "GE", "IL", "IQ", "IR", "JO", "KW", "LB", "OM", "PS", "QA", "SA", "SY",
    "TR", "YE",
];

/// West of this many degrees west North America is `wnam`.
const WNAM_WEST_OF: u32 = 100;

/// Whether `longitude` (decimal degrees, negative west, as `cf.longitude` writes it) lies
/// west of `degrees` west. Read by hand: a float parser would cost the module ~10 KB for a
/// comparison with a whole number.
fn west_of(longitude: &str, degrees: u32) -> bool {
    let Some(west) = longitude.trim().strip_prefix('-') else {
        return false;
    };
    let (whole, fraction) = west.split_once('.').unwrap_or((west, ""));
    let Ok(whole) = whole.parse::<u32>() else {
        return false;
    };
    whole > degrees || (whole == degrees && fraction.bytes().any(|b| (b'1'..=b'9').contains(&b)))
}

impl Region {
    /// Its name: the location hint, and the last part of its coordinator's object name.
    pub fn name(self) -> &'static str {
        match self {
            Region::Wnam => "wnam",
            Region::Enam => "enam",
            Region::Sam => "sam",
            Region::Weur => "weur",
            Region::Eeur => "eeur",
            Region::Apac => "apac",
            Region::Oc => "oc",
            Region::Afr => "afr",
            Region::Me => "me",
        }
    }

    /// The region a name (a location hint) names.
    pub fn parse(name: &str) -> Option<Region> {
        REGIONS.into_iter().find(|r| r.name() == name)
    }

    /// The region of a request's `cf` fields, `None` when they name no place.
    pub fn of_cf(cf: &Cf<'_>) -> Option<Region> {
        let country = cf.country.unwrap_or("").to_ascii_uppercase();
        let is = |list: &[&str]| list.contains(&country.as_str());
        Some(match cf.continent?.to_ascii_uppercase().as_str() {
            "NA" if cf.longitude.is_some_and(|l| west_of(l, WNAM_WEST_OF)) => Region::Wnam,
            "NA" => Region::Enam,
            "SA" => Region::Sam,
            "EU" if is(EASTERN_EUROPE) => Region::Eeur,
            "EU" => Region::Weur,
            "AS" if is(MIDDLE_EAST) => Region::Me,
            "AS" => Region::Apac,
            "OC" | "AN" => Region::Oc,
            "AF" => Region::Afr,
            _ => return None,
        })
    }

    /// A `cf` of a place in this region (its main city): what a local runtime's requests
    /// carry to stand for it (`drill --regions`, through workerd's cf blob header).
    pub fn sample_cf(self) -> Cf<'static> {
        let (continent, country, longitude) = match self {
            Region::Wnam => ("NA", "US", "-122.42"),
            Region::Enam => ("NA", "US", "-77.04"),
            Region::Sam => ("SA", "BR", "-46.63"),
            Region::Weur => ("EU", "FR", "2.35"),
            Region::Eeur => ("EU", "PL", "21.01"),
            Region::Apac => ("AS", "JP", "139.69"),
            Region::Oc => ("OC", "AU", "151.21"),
            Region::Afr => ("AF", "ZA", "18.42"),
            Region::Me => ("AS", "AE", "55.27"),
        };
        Cf {
            continent: Some(continent),
            country: Some(country),
            longitude: Some(longitude),
        }
    }

    /// The region of a request: its `cf`'s, or [`DEFAULT_REGION`] without one that names a
    /// place.
    pub fn pick(cf: Option<&Cf<'_>>) -> Region {
        cf.and_then(Region::of_cf).unwrap_or(DEFAULT_REGION)
    }
}

/// The `cf` fields a region is picked from (`request.cf`; each absent when the platform
/// did not set it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cf<'a> {
    pub continent: Option<&'a str>,
    pub country: Option<&'a str>,
    pub longitude: Option<&'a str>,
}

/// The last part of the global coordinator's object name.
pub const GLOBAL: &str = "global";

/// The Durable Object name of the coordinator of `service`, a settings hash and `region`:
/// one per service, breaker settings and region.
pub fn object_name(service: &str, config: &str, region: Region) -> String {
    format!("{service}/{config}/{}", region.name())
}

/// The global coordinator's name: the regions' windows merge there.
pub fn global_name(service: &str, config: &str) -> String {
    format!("{service}/{config}/{GLOBAL}")
}

/// What a coordinator is, from the object name it was reached under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A region's: it merges its window into the global one once per report interval.
    Region(Region),
    /// The global one: the regions report to it.
    Global,
    /// Reached under a name with no region (an isolate of an earlier release): it decides on
    /// its own reports alone.
    Alone,
}

impl Role {
    /// The role of the coordinator named `object` (`{service}/{settings}/{region}`); a last
    /// part that is no region and not `global` is an error naming it.
    pub fn of(object: &str) -> Result<Role, String> {
        let parts: Vec<&str> = object.rsplitn(3, '/').collect();
        match parts.as_slice() {
            [last, _, _] if *last == GLOBAL => Ok(Role::Global),
            [last, _, _] => Region::parse(last).map(Role::Region).ok_or_else(|| {
                format!(
                    "coordinator `{object}`: `{last}` is no region (one of {}) nor `{GLOBAL}`",
                    REGIONS.map(Region::name).join(", ")
                )
            }),
            _ => Ok(Role::Alone),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cf<'a>(continent: &'a str, country: &'a str, longitude: &'a str) -> Cf<'a> {
        Cf {
            continent: Some(continent),
            country: Some(country),
            longitude: Some(longitude),
        }
    }

    #[test]
    fn cf_fields_map_to_the_location_hints() {
        let cases = [
            (cf("NA", "US", "-122.42"), Region::Wnam),
            (cf("NA", "US", "-73.99"), Region::Enam),
            (cf("NA", "CA", "-99.5"), Region::Enam),
            (cf("NA", "MX", "-99.13"), Region::Enam),
            (cf("SA", "BR", "-46.6"), Region::Sam),
            (cf("EU", "DE", "8.68"), Region::Weur),
            (cf("EU", "pl", "21.0"), Region::Eeur),
            (cf("EU", "GB", "-0.12"), Region::Weur),
            (cf("AS", "AE", "55.3"), Region::Me),
            (cf("AS", "TR", "28.9"), Region::Me),
            (cf("AS", "JP", "139.7"), Region::Apac),
            (cf("AS", "IN", "72.8"), Region::Apac),
            (cf("OC", "AU", "151.2"), Region::Oc),
            (cf("AN", "AQ", "0"), Region::Oc),
            (cf("AF", "ZA", "18.4"), Region::Afr),
        ];
        for (c, want) in cases {
            assert_eq!(Region::of_cf(&c), Some(want), "{c:?}");
        }
        // North America with no longitude: the east.
        let no_lon = Cf {
            continent: Some("NA"),
            ..Cf::default()
        };
        assert_eq!(Region::of_cf(&no_lon), Some(Region::Enam));
    }

    #[test]
    fn west_of_reads_decimal_degrees() {
        assert!(west_of("-122.42", 100));
        assert!(west_of(" -100.01", 100));
        assert!(!west_of("-100", 100));
        assert!(!west_of("-100.000", 100));
        assert!(!west_of("-99.99", 100));
        assert!(!west_of("122.4", 100), "east");
        assert!(!west_of("", 100));
        assert!(!west_of("-abc", 100));
    }

    #[test]
    fn each_regions_sample_cf_maps_back_to_it() {
        for r in REGIONS {
            assert_eq!(Region::of_cf(&r.sample_cf()), Some(r));
        }
    }

    #[test]
    fn a_request_without_cf_or_with_no_place_gets_the_default_region() {
        assert_eq!(Region::pick(None), DEFAULT_REGION);
        assert_eq!(Region::pick(Some(&Cf::default())), DEFAULT_REGION);
        assert_eq!(Region::pick(Some(&cf("T1", "T1", ""))), DEFAULT_REGION);
        assert_eq!(Region::pick(Some(&cf("XX", "", ""))), DEFAULT_REGION);
    }

    #[test]
    fn every_region_names_itself_and_parses_back() {
        for r in REGIONS {
            assert_eq!(Region::parse(r.name()), Some(r));
        }
        let mut names: Vec<&str> = REGIONS.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 9, "nine distinct hints");
        assert_eq!(Region::parse("global"), None);
        assert_eq!(Region::parse("WEUR"), None);
    }

    #[test]
    fn object_names_carry_the_region_and_name_their_role() {
        let name = object_name("recs", "ab12", Region::Weur);
        assert_eq!(name, "recs/ab12/weur");
        assert_eq!(Role::of(&name), Ok(Role::Region(Region::Weur)));
        assert_eq!(Role::of(&global_name("recs", "ab12")), Ok(Role::Global));
        // A service name with a slash still parses from the end.
        assert_eq!(Role::of("a/b/ab12/apac"), Ok(Role::Region(Region::Apac)));
        // An earlier release's name, with no region: alone.
        assert_eq!(Role::of("recs/ab12"), Ok(Role::Alone));
        let e = Role::of("recs/ab12/mars").unwrap_err();
        assert!(e.contains("`mars` is no region"), "{e}");
    }
}
