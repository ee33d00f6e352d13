import DarkroomCore
import DarkroomHTTP
import Testing

@Suite("Format negotiation")
struct FormatNegotiationTests {
  let negotiation = FormatNegotiation()

  @Test(
    "browsers' own Accept headers",
    arguments: [
      // Chrome and Firefox (image requests), Safari 17, curl, none.
      ("image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", false, ImageFormat.avif),
      ("image/avif,image/webp,*/*", true, .avif),
      ("image/webp,image/avif,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5", false, .avif),
      ("*/*", false, .jpeg),
      ("*/*", true, .png),
      ("image/webp,*/*;q=0.8", false, .webp),
      ("image/avif;q=0,image/webp", false, .webp),
      ("IMAGE/AVIF ; Q=0.5", false, .avif),
      ("image/avif;q=2,image/webp;q=abc", false, .jpeg),
    ])
  func browsers(_ accept: String, alpha: Bool, expected: ImageFormat) {
    let choice = negotiation.choose(accept: accept, hasAlpha: alpha)
    #expect(choice.format == expected, "\(accept)")
    #expect(choice.variesOnAccept)
  }

  @Test("no Accept falls back; a configured order is followed; no preferred formats never vary")
  func orderAndFallback() {
    #expect(negotiation.choose(accept: nil, hasAlpha: false).format == .jpeg)
    let webpFirst = FormatNegotiation(preferred: [.webp, .avif])
    #expect(webpFirst.choose(accept: "image/avif,image/webp", hasAlpha: false).format == .webp)
    let none = FormatNegotiation(preferred: [])
    #expect(none.choose(accept: "image/avif", hasAlpha: true) == FormatNegotiation.Choice(format: .png, variesOnAccept: false))
  }

  @Test("an animated source gets WebP when Accept names it and WebP is preferred, else GIF")
  func animated() {
    #expect(negotiation.choose(accept: "image/avif,image/webp,*/*", hasAlpha: false).animatedFormat == .webp)
    #expect(negotiation.choose(accept: "image/avif,*/*", hasAlpha: false).animatedFormat == .gif)
    #expect(negotiation.choose(accept: "image/webp;q=0", hasAlpha: false).animatedFormat == .gif)
    #expect(negotiation.choose(accept: nil, hasAlpha: false).animatedFormat == .gif)
    #expect(FormatNegotiation(preferred: [.avif]).choose(accept: "image/webp", hasAlpha: false).animatedFormat == .gif)
  }

  @Test("a hostile Accept header is read only up to its bounds")
  func hostile() {
    let long = String(repeating: "x/y;q=0.1,", count: 100_000) + "image/avif"
    #expect(negotiation.choose(accept: long, hasAlpha: false).format == .jpeg)
    let commas = String(repeating: ",", count: 10_000) + "image/webp"
    #expect(negotiation.choose(accept: commas, hasAlpha: false).format == .jpeg)
    #expect(negotiation.choose(accept: ";;;q=;/;=,\u{0}/\u{0}", hasAlpha: false).format == .jpeg)
  }
}
