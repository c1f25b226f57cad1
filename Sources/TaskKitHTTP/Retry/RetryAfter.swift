import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Parsing of the HTTP `Retry-After` header (RFC 9110 §10.2.3).
public enum RetryAfter {
    /// The delay a `Retry-After` value asks for, or `nil` when the value is neither a
    /// non-negative integer number of seconds nor an HTTP-date.
    ///
    /// HTTP-dates are accepted in the three forms RFC 9110 requires recipients to parse
    /// (IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT`,
    /// asctime `Sun Nov  6 08:49:37 1994`). A date in the past means "now" (0).
    ///
    /// A delta too large for a `Duration` saturates (at about 146 billion years), which
    /// ``HTTPRetryPolicy`` bounds by its cap and ceiling.
    ///
    /// - Parameters:
    ///   - value: The header value.
    ///   - now: The current wall-clock time, against which a date is measured.
    public static func delay(from value: String, now: Date) -> Duration? {
        seconds(from: value, now: now).map(Duration.init(timeInterval:))
    }

    /// The delay asked for by `response`'s `Retry-After` header, if present and valid.
    public static func delay(from response: HTTPURLResponse, now: Date) -> Duration? {
        seconds(from: response, now: now).map(Duration.init(timeInterval:))
    }

    /// ``delay(from:now:)-(String,_)`` in seconds, the header's own unit: delta-seconds, or the
    /// distance between two `Date`s (`.greatestFiniteMagnitude` for a delta beyond any `Double`).
    static func seconds(from value: String, now: Date) -> TimeInterval? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return nil }
        if trimmed.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            // Delta-seconds; saturate absurdly long values instead of failing.
            return TimeInterval(trimmed) ?? .greatestFiniteMagnitude
        }
        guard let date = httpDate(from: trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// The seconds asked for by `response`'s `Retry-After` header, if present and valid.
    static func seconds(from response: HTTPURLResponse, now: Date) -> TimeInterval? {
        guard let value = response.value(forHTTPHeaderField: "Retry-After") else { return nil }
        return seconds(from: value, now: now)
    }

    /// Parses an HTTP-date in any of its three forms.
    public static func httpDate(from text: String) -> Date? {
        for format in formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    private static let formats = [
        "EEE, dd MMM yyyy HH:mm:ss zzz",  // IMF-fixdate
        "EEEE, dd-MMM-yy HH:mm:ss zzz",  // RFC 850
        "EEE MMM d HH:mm:ss yyyy",  // asctime (day padded with a space)
    ]
}
