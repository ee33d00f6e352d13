import CCurl
import CCurlShim
import DarkroomCore
import Foundation

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

  /// Starts opening and initialising libcurl on a thread of its own, for a process that is about
  /// to fetch over HTTP: its thirty libraries (about 5 ms of the dynamic loader's work) then load
  /// while the process does other things, such as parsing its command line, instead of delaying
  /// the first transfer. Safe to call more than once and from any thread; a failure is reported
  /// by the first ``initialize()`` that needs libcurl.
  ///
  /// ```swift
  /// Curl.startLoading()        // at process start
  /// try Curl.initialize()      // later: waits for the load if it has not finished
  /// ```
  package static func startLoading() {
    let thread = Thread { _ = try? initialize() }
    thread.name = "darkroom.curl-load"
    thread.start()
  }

  /// libcurl's version line (`libcurl/7.88.1 OpenSSL/3.0.x zlib/… nghttp2/…`), opening libcurl if
  /// needed, or `"unavailable"` when it cannot be opened.
  public static var version: String {
    guard (try? initialize()) != nil else { return "unavailable" }
    return String(cString: dr_curl_version())
  }
}
