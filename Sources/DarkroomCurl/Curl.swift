import CCurl
import CCurlShim
import DarkroomCore

/// libcurl set-up: initialised exactly once per process, on first use.
///
/// ```swift
/// try Curl.initialize()
/// print(Curl.version)   // "7.88.1"
/// ```
package enum Curl {
  private static let initialization: Result<Void, PipelineError> = {
    let code = dr_global_init()
    guard code == CURLE_OK else {
      return .failure(PipelineError(.fetchFailed, "libcurl failed to initialise: \(String(cString: curl_easy_strerror(code)))"))
    }
    return .success(())
  }()

  /// Initialises libcurl if that has not happened yet; safe from any thread.
  public static func initialize() throws(PipelineError) { try initialization.get() }

  /// libcurl's version line (`libcurl/7.88.1 OpenSSL/3.0.x zlib/… nghttp2/…`).
  public static var version: String { String(cString: curl_version()) }
}
