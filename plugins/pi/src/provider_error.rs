//! What a model provider's failure means for the caller: whether asking
//! again can help, and when (issue 54, item 17).

/// A provider's error as pi reports it, classified by the HTTP status it
/// starts with (`429 Rate limit reached…`, as the OpenAI and Anthropic
/// SDKs write them), never by digits elsewhere in it ("Limit 40100",
/// "in 403ms"). Without a status, only the words of a refused key count.
#[derive(Debug, PartialEq)]
pub enum ProviderError {
    /// 401 or 403, or a refused or missing key: retrying cannot help.
    Credentials,
    /// Another 4xx (an unknown model, a bad request): nor can it.
    Refused(u16),
    /// Rate limited, overloaded, failing or unreachable: later may work,
    /// after `retry_after_ms` when the provider said.
    Transient {
        status: Option<u16>,
        retry_after_ms: Option<u64>,
    },
}

impl ProviderError {
    pub fn of(why: &str) -> ProviderError {
        let status = why
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .filter(|digits| digits.len() == 3)
            .and_then(|digits| digits.parse::<u16>().ok())
            .filter(|code| (400..600).contains(code));
        match status {
            Some(401 | 403) => ProviderError::Credentials,
            Some(code @ 400..=499) if !matches!(code, 408 | 409 | 425 | 429) => {
                ProviderError::Refused(code)
            }
            None if refused_key(why) => ProviderError::Credentials,
            status => ProviderError::Transient {
                status,
                retry_after_ms: retry_after_ms(why),
            },
        }
    }
}

/// Whether a message without a status says the key was refused.
fn refused_key(why: &str) -> bool {
    let why = why.to_ascii_lowercase();
    [
        "unauthorized",
        "forbidden",
        "invalid api key",
        "incorrect api key",
        "invalid x-api-key",
        "no api key",
        "authentication failed",
    ]
    .iter()
    .any(|sign| why.contains(sign))
}

/// "try again in 403ms" / "retry after 20s" / "in 1.5 seconds": how long
/// the provider asked to wait, when it said.
fn retry_after_ms(why: &str) -> Option<u64> {
    let words = regex_lite::Regex::new(
        r"(?i)(?:try again|retry)(?: after| in)\s+([0-9]+(?:\.[0-9]+)?)\s*(ms|milliseconds?|s|sec|seconds?)\b",
    )
    .expect("a valid pattern");
    let found = words.captures(why)?;
    let amount: f64 = found[1].parse().ok()?;
    let scale = if found[2].to_ascii_lowercase().starts_with("ms")
        || found[2].to_ascii_lowercase().starts_with("milli")
    {
        1.0
    } else {
        1000.0
    };
    Some((amount * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_errors_are_read_by_their_status() {
        let transient = |status, ms| ProviderError::Transient {
            status,
            retry_after_ms: ms,
        };
        for (why, expected) in [
            (
                "429 Rate limit reached. Limit 40100. Please try again in 403ms.",
                transient(Some(429), Some(403)),
            ),
            (
                "500 Internal error (Limit 40100), retry after 2 seconds",
                transient(Some(500), Some(2000)),
            ),
            ("Connection error.", transient(None, None)),
            (
                "404 The model `x` does not exist",
                ProviderError::Refused(404),
            ),
            ("403 Project lacks access", ProviderError::Credentials),
            ("401 Incorrect API key provided", ProviderError::Credentials),
            ("Incorrect API key provided", ProviderError::Credentials),
            ("4010 things", transient(None, None)),
        ] {
            assert_eq!(ProviderError::of(why), expected, "{why}");
        }
    }
}
