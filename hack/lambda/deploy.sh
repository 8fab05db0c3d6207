#!/usr/bin/env bash
# Deploys `dorylus function` to AWS Lambda with the aws CLI (v2), creating what is missing and
# updating what exists, with the least-privilege IAM policies of hack/lambda/policies:
#
#   hack/lambda/deploy.sh --function NAME --region REGION (--zip FILE | --image URI) [flags]
#
#   --zip FILE                 a zip of hack/lambda/build.sh (runtime provided.al2023)
#   --image URI                or a container image of build.sh, pushed to ECR in REGION
#   --arch amd64|arm64         the zip's or image's architecture (default amd64)
#   --memory MB                the function's memory (default 3008: the CRD's memoryMB default)
#   --timeout SECONDS          the function's timeout (default 30, under the graph servers' 60 s
#                              call timeout)
#   --subnets ID,ID            run the function in these subnets of the cluster's VPC (the pull
#                              data path; private subnets with routes to the pods)
#   --security-group ID        the function's security group in that VPC (with --subnets)
#   --pod-security-group ID    let the function's security group reach the servers' data ports
#                              (5000, 5100) in this one (the nodes' or the pods' group)
#   --oidc-provider HOST/PATH  also make the graph servers' invoker role, assumed through IRSA
#                              from the EKS cluster with this OIDC provider (oidc.eks.REGION...)
#   --service-account NS:NAME  the job's ServiceAccount that role trusts (with --oidc-provider):
#                              <job>-runtime, the operator's; * matches any run of characters
#
# The execution role NAME-exec may only write the function's logs (and, with --subnets, manage
# its network interfaces); the invoker role NAME-invoker may only invoke the function. It prints
# the function's ARN and the invoker role's ARN (for spec.tensorBackend.lambda.credentials.roleARN).
# It needs the aws CLI with credentials allowed to manage those roles, the function, its log
# group and, with --pod-security-group, that security group's ingress rules.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() {
	echo "deploy.sh: $*" >&2
	exit 1
}

name='' region='' zip='' image='' arch=amd64 memory=3008 timeout=30
subnets='' sg='' pod_sg='' oidc='' sa=''
while (($#)); do
	case $1 in
	-h | --help)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
		exit 0
		;;
	--function) name=${2-} ;;
	--region) region=${2-} ;;
	--zip) zip=${2-} ;;
	--image) image=${2-} ;;
	--arch) arch=${2-} ;;
	--memory) memory=${2-} ;;
	--timeout) timeout=${2-} ;;
	--subnets) subnets=${2-} ;;
	--security-group) sg=${2-} ;;
	--pod-security-group) pod_sg=${2-} ;;
	--oidc-provider) oidc=${2-} ;;
	--service-account) sa=${2-} ;;
	*) die "unknown flag $1 (--help lists them)" ;;
	esac
	(($# >= 2)) || die "$1 needs a value"
	shift 2
done
[[ -n $name && -n $region ]] || die "--function and --region are required"
if [[ -n $zip && -n $image || -z $zip && -z $image ]]; then
	die "give exactly one of --zip and --image"
fi
[[ -z $zip || -f $zip ]] || die "--zip $zip: no such file"
case $arch in
amd64) lambda_arch=x86_64 ;;
arm64) lambda_arch=arm64 ;;
*) die "--arch $arch: want amd64 or arm64" ;;
esac
if [[ -n $subnets && -z $sg || -z $subnets && -n $sg ]]; then
	die "--subnets and --security-group go together"
fi
[[ -z $pod_sg || -n $sg ]] || die "--pod-security-group needs --subnets and --security-group"
if [[ -n $oidc && -z $sa || -z $oidc && -n $sa ]]; then
	die "--oidc-provider and --service-account go together"
fi
[[ -z $sa || $sa == *:* ]] || die "--service-account $sa: want NAMESPACE:NAME"

export AWS_REGION=$region AWS_DEFAULT_REGION=$region
account=$(aws sts get-caller-identity --query Account --output text)
ports=(5000 5100) # the graph servers' and parameter servers' gRPC ports (pkg/jobconfig)

# policy FILE prints hack/lambda/policies/FILE with its placeholders filled in.
# shellcheck disable=SC2016 # the placeholders are literal
policy() {
	local doc
	doc=$(<"$here/policies/$1")
	doc=${doc//'${ACCOUNT}'/$account}
	doc=${doc//'${REGION}'/$region}
	doc=${doc//'${FUNCTION}'/$name}
	doc=${doc//'${OIDC_PROVIDER}'/$oidc}
	doc=${doc//'${NAMESPACE}'/${sa%%:*}}
	doc=${doc//'${SERVICE_ACCOUNT}'/${sa#*:}}
	printf '%s\n' "$doc"
}

# role NAME TRUST makes role NAME (or updates its trust policy) and prints its ARN.
role() {
	if aws iam get-role --role-name "$1" >/dev/null 2>&1; then
		aws iam update-assume-role-policy --role-name "$1" --policy-document "$(policy "$2")"
	else
		aws iam create-role --role-name "$1" --assume-role-policy-document "$(policy "$2")" >/dev/null
	fi
	aws iam get-role --role-name "$1" --query Role.Arn --output text
}

exec_role=$(role "$name-exec" function-trust.json)
aws iam put-role-policy --role-name "$name-exec" --policy-name logs --policy-document "$(policy function-logs.json)"
if [[ -n $subnets ]]; then
	aws iam put-role-policy --role-name "$name-exec" --policy-name vpc --policy-document "$(policy function-vpc.json)"
	vpc=(--vpc-config "SubnetIds=$subnets,SecurityGroupIds=$sg")
else
	aws iam delete-role-policy --role-name "$name-exec" --policy-name vpc 2>/dev/null || true
	vpc=(--vpc-config "SubnetIds=[],SecurityGroupIds=[]")
fi

# The function writes only to its own log group, which it may not create.
group=/aws/lambda/$name
if [[ $(aws logs describe-log-groups --log-group-name-prefix "$group" --query "length(logGroups[?logGroupName=='$group'])" --output text) == 0 ]]; then
	aws logs create-log-group --log-group-name "$group"
fi
aws logs put-retention-policy --log-group-name "$group" --retention-in-days 14

if [[ -n $zip ]]; then
	code=(--zip-file "fileb://$zip")
	create=(--runtime provided.al2023 --handler bootstrap "${code[@]}")
else
	code=(--image-uri "$image")
	create=(--package-type Image --code "ImageUri=$image")
fi
config=(--role "$exec_role" --memory-size "$memory" --timeout "$timeout")
if aws lambda get-function --function-name "$name" >/dev/null 2>&1; then
	aws lambda update-function-code --function-name "$name" --architectures "$lambda_arch" "${code[@]}" >/dev/null
	aws lambda wait function-updated-v2 --function-name "$name"
	aws lambda update-function-configuration --function-name "$name" "${config[@]}" "${vpc[@]}" >/dev/null
else
	[[ -n $subnets ]] || vpc=()
	# A new role takes a few seconds to be assumable by Lambda.
	for try in {1..10}; do
		if aws lambda create-function --function-name "$name" --architectures "$lambda_arch" "${config[@]}" "${create[@]}" "${vpc[@]}" >/dev/null; then
			break
		fi
		((try < 10)) || die "could not create the function $name"
		sleep 6
	done
fi
aws lambda wait function-updated-v2 --function-name "$name"

if [[ -n $pod_sg ]]; then
	for port in "${ports[@]}"; do
		if ! out=$(aws ec2 authorize-security-group-ingress --group-id "$pod_sg" \
			--ip-permissions "IpProtocol=tcp,FromPort=$port,ToPort=$port,UserIdGroupPairs=[{GroupId=$sg,Description=dorylus function}]" 2>&1); then
			[[ $out == *InvalidPermission.Duplicate* ]] || die "open port $port of $pod_sg to $sg: $out"
		fi
	done
fi

echo "function: $(aws lambda get-function --function-name "$name" --query Configuration.FunctionArn --output text)"
if [[ -n $oidc ]]; then
	role "$name-invoker" graph-server-trust.json >/dev/null
	aws iam put-role-policy --role-name "$name-invoker" --policy-name invoke --policy-document "$(policy graph-server-invoke.json)"
	echo "invoker role (spec.tensorBackend.lambda.credentials.roleARN): $(aws iam get-role --role-name "$name-invoker" --query Role.Arn --output text)"
fi
