"""The interceptor reads the job's source header (`<timestamp>,<offset>,<topic>`, built by the sink projection) in
place, without a string per field (jvm/ReplicationInterceptor.java, `indexOf` and `parseLong`): it must read
every number the job writes as Long.parseLong does, and refuse anything else (a refused header leaves the record
as it came, as an exception in any producer interceptor does).

Needs a JDK: the job's jars (the interceptor's compiled as the job does on first use, kafka-clients); a
single-file Java program calls the interceptor's readers.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.artifacts import job_jars

pytestmark = [pytest.mark.integration]

PROGRAM = """
import io.kmirror.replication.ReplicationInterceptor;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

public class ReadHeaders {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        for (String line; (line = in.readLine()) != null; ) {
            byte[] header = line.getBytes(StandardCharsets.US_ASCII);
            try {
                int first = ReplicationInterceptor.indexOf(header, 0);
                int second = ReplicationInterceptor.indexOf(header, first + 1);
                long timestamp = ReplicationInterceptor.parseLong(header, 0, first);
                long offset = ReplicationInterceptor.parseLong(header, first + 1, second);
                System.out.println(timestamp + " " + offset);
            } catch (NumberFormatException e) {
                System.out.println("refused");
            }
        }
    }
}
"""

LONG_MAX = 2**63 - 1


def python_reading(header: str) -> str:
    """What Long.parseLong of each field gives, in the program's output format."""
    parts = header.split(",", 2)
    if len(parts) < 3:
        return "refused"
    out = []
    for field in parts[:2]:
        digits = field[1:] if field.startswith("-") else field
        if not digits or not digits.isdigit() or not -(LONG_MAX + 1) < int(field) <= LONG_MAX:
            return "refused"
        out.append(str(int(field)))
    return " ".join(out)


def test_the_source_header_is_read_as_long_parse_long_reads_it(tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java is not None, "a JDK is needed"
    rng = random.Random(18)
    headers = [
        "1732600000000,0,bench.d00",
        "-1,5,legacy",  # a pre-0.10 record: no timestamp
        "0,9223372036854775807,t",  # the largest offset
        "1,9223372036854775808,t",  # one past it: refused
        "12,34",  # no topic field
        ",5,t",  # an empty timestamp
        "1,-,t",  # a sign alone
        "1,+5,t",  # Long.parseLong takes '+'; the job never writes one
        "1a,5,t",
        "1,5,topic,with,commas",  # the topic is the rest of the header
    ]
    headers += [
        f"{rng.randrange(-1, 2**41)},{rng.randrange(0, 2**63)},bench.d{rng.randrange(100):02d}" for _ in range(500)
    ]
    source = tmp_path / "ReadHeaders.java"
    source.write_text(PROGRAM)
    out = subprocess.run(
        [java, "-cp", ":".join(str(j) for j in job_jars()), str(source)],
        input="\n".join(headers) + "\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    expected = [python_reading(h) for h in headers]
    assert out == expected
