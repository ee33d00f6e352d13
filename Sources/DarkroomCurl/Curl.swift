import CCurl
import CCurlShim
import DarkroomCore

/// libcurl set-up: opened (`dlopen`: nothing links it, so a process that fetches nothing over HTTP
/// never loads its twenty libraries) and initialised exactly once per process, on first use.
///
/// ```swift
/// try Curl.initialize()
/// print(Curl.version)   // "7.88.1"
/// ```
package enum Curl {
  private static let initialization: Result<Void, PipelineError> = {
    let code = dr_global_init()
    let unopened = String(cString: dr_curl_open_failure())
    guard unopened.isEmpty else { return .failure(PipelineError(.libraryUnavailable, unopened)) }
    guard code == CURLE_OK else {
      return .failure(PipelineError(.fetchFailed, "libcurl failed to initialise: \(String(cString: dr_curl_strerror(code)))"))
    }
    return .success(())
  }()

  /// Initialises libcurl if that has not happened yet; safe from any thread.
  public static func initialize() throws(PipelineError) { try initialization.get() }

  /// libcurl's version line (`libcurl/7.88.1 OpenSSL/3.0.x zlib/… nghttp2/…`), opening libcurl if
  /// needed, or `"unavailable"` when it cannot be opened.
  public static var version: String {
    guard (try? initialize()) != nil else { return "unavailable" }
    return String(cString: dr_curl_version())
  }
}
