import Testing

@testable import PushRelay

/// `/etc/push-relay/environment` read as systemd's `EnvironmentFile=` reads it, so `--env-file`
/// gives a command run by hand the values the packaged unit gives the service.
@Suite("Environment files")
struct EnvironmentFileTests {
    private func parse(_ text: String) throws -> [String] {
        try EnvironmentFile.parse(text, file: "environment").map { "\($0.name)=\($0.value)" }
    }

    @Test("comments, blank lines, whitespace, quotes, escapes and continued lines as systemd reads them")
    func systemdSyntax() throws {
        let text = """
            # comment
            ; comment too
              \r
            PLAIN=postgresql://relay:pw@db/relay?sslmode=require
            SPACED =  a value with  inner spaces\t
            SINGLE='it\\s $verbatim "here"'
            DOUBLE="say \\"hi\\" \\\\ \\$HOME \\n"
            ESCAPED=a\\ b\\\\c
            CONTINUED=first \\
              second
            EMPTY=
            """
        #expect(
            try parse(text) == [
                "PLAIN=postgresql://relay:pw@db/relay?sslmode=require",
                "SPACED=a value with  inner spaces",
                #"SINGLE=it\s $verbatim "here""#,
                #"DOUBLE=say "hi" \ $HOME \n"#,
                #"ESCAPED=a b\c"#,
                "CONTINUED=first second",
                "EMPTY=",
            ]
        )
    }

    @Test("a line that is not NAME=value is an error naming the file and line, never the line's text")
    func refusals() {
        for (text, line) in [
            ("A=1\nexport B=secret-value\n", 2), ("A=1\n\n9B=secret-value", 3), ("secret-value\n", 1), ("A=\"secret-value\n", 1),
            ("A='secret-value", 1),
        ] {
            #expect {
                try EnvironmentFile.parse(text, file: "/etc/push-relay/environment")
            } throws: { error in
                let message = "\(error)"
                return message.hasPrefix("/etc/push-relay/environment, line \(line):") && !message.contains("secret-value")
            }
        }
    }
}
