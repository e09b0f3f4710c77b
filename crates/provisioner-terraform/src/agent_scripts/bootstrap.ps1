# Starts the Coder agent of a workspace: downloads the coder binary for this platform from the
# deployment and runs `coder agent`. The coder/coder provider fills in the deployment's URL and
# the agent's authentication type; CODER_AGENT_TOKEN comes from the template.
$ErrorActionPreference = "Stop"
$ProgressPreference = "SilentlyContinue"

$binaryUrl = "${ACCESS_URL}bin/@BINARY@"
$binaryDir = Join-Path ([System.IO.Path]::GetTempPath()) ("coder-" + [System.Guid]::NewGuid())
New-Item -ItemType Directory -Force -Path $binaryDir | Out-Null
$binary = Join-Path $binaryDir "coder.exe"

# The deployment may not be reachable yet (a network still coming up): keep trying, waiting
# twice as long after each failure, at most 30 seconds.
$delay = 1
while ($true) {
	try {
		Invoke-WebRequest -Uri $binaryUrl -OutFile $binary -UseBasicParsing -TimeoutSec 300
		break
	} catch {
		Write-Output "downloading $binaryUrl failed: $($_.Exception.Message); retrying in $delay s"
		Start-Sleep -Seconds $delay
		$delay = [Math]::Min($delay * 2, 30)
	}
}

$env:CODER_AGENT_AUTH = "${AUTH_TYPE}"
$env:CODER_AGENT_URL = "${ACCESS_URL}"
& $binary agent
exit $LASTEXITCODE
