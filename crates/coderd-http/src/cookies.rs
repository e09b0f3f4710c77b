//! Reading cookies from a request's `Cookie` headers, for every front door (the API's session
//! token, the OIDC state, the app proxy's tokens, the dashboard's forms). A browser may send
//! several `Cookie` headers and several cookies in each.

use axum::http::{HeaderMap, header};

/// The values of the cookies named `name`, in the order the browser sent them.
pub fn values<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(move |(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// The first value of the cookie named `name`.
pub fn value<'a>(headers: &'a HeaderMap, name: &'a str) -> Option<&'a str> {
    values(headers, name).next()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn cookies_are_found_among_others_and_across_headers() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; oauth_state=k:v; a=3"),
        );
        headers.append(header::COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(value(&headers, "oauth_state"), Some("k:v"));
        assert_eq!(value(&headers, "b"), Some("2"));
        assert_eq!(value(&headers, "c"), None);
        assert_eq!(values(&headers, "a").collect::<Vec<_>>(), ["1", "3"]);
    }
}
