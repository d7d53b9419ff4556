package v1alpha1

// APIGateway's Ready condition and its reasons.
const (
	// ConditionReady is True when every enabled controller is Ready.
	ConditionReady = "Ready"

	// ReasonAllControllersReady: every enabled controller's rollout is complete.
	ReasonAllControllersReady = "AllControllersReady"
	// ReasonControllersProgressing: at least one controller is rolling out.
	ReasonControllersProgressing = "ControllersProgressing"
	// ReasonControllersBlocked: at least one enabled controller waits for CRDs
	// or a dependency; the others are Ready.
	ReasonControllersBlocked = "ControllersBlocked"
	// ReasonControllersDegraded: at least one controller's rollout failed or
	// its pods are failing.
	ReasonControllersDegraded = "ControllersDegraded"
	// ReasonApplyFailed: the operator could not write a controller's Deployment.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonNoControllersEnabled: every controller is disabled.
	ReasonNoControllersEnabled = "NoControllersEnabled"
	// ReasonDeleting: the APIGateway is being deleted.
	ReasonDeleting = "Deleting"
)

// Reasons of a controller's phase, in ControllerStatus.Reason.
const (
	// ReasonDisabled (Disabled): the controller is disabled in the spec.
	ReasonDisabled = "Disabled"
	// ReasonCRDNotFound (Blocked): a required CRD is not installed.
	ReasonCRDNotFound = "CRDNotFound"
	// ReasonCRDNotEstablished (Blocked): a required CRD exists but is not
	// Established yet, or is being deleted.
	ReasonCRDNotEstablished = "CRDNotEstablished"
	// ReasonCRDVersionNotServed (Blocked): a required CRD does not serve the
	// required version.
	ReasonCRDVersionNotServed = "CRDVersionNotServed"
	// ReasonDependencyNotReady (Blocked): a controller this one depends on is
	// not Ready.
	ReasonDependencyNotReady = "DependencyNotReady"
	// ReasonNotConfigured (Disabled): the spec does not configure what needs
	// it: a component that runs only when configured (the rate-limit
	// service: spec.rateLimits.global), or the default gateway
	// (spec.gateway not set or disabled; GatewayStatus.Reason).
	ReasonNotConfigured = "NotConfigured"
	// ReasonSecretNotFound (Blocked): a Secret the spec names (the Redis
	// Secret of spec.rateLimits.global) does not exist in Portico's
	// namespace, or lacks a required key; the message names both.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretInvalid (Blocked): a Secret the spec names holds a value
	// the component cannot use (a Redis address that is not host:port).
	ReasonSecretInvalid = "SecretInvalid"
	// ReasonRolloutInProgress (Progressing): the Deployment is rolling out.
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonRolloutComplete (Ready): the Deployment's rollout is complete.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonScaledToZero (Ready): replicas is 0; the Deployment exists with no pods.
	ReasonScaledToZero = "ScaledToZero"
	// ReasonProgressDeadlineExceeded (Degraded): the rollout did not progress
	// within the Deployment's progress deadline.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonReplicaFailure (Degraded): the Deployment cannot create its pods
	// (its ReplicaFailure condition, for example a missing ServiceAccount, an
	// exhausted quota or an admission webhook's refusal); the message has the
	// condition's reason and message.
	ReasonReplicaFailure = "ReplicaFailure"
	// ReasonCrashLoopBackOff (Degraded): a controller container keeps
	// crashing. It stays the reason while the container runs between two
	// crashes without becoming ready, so the phase does not flap.
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	// ReasonImagePullFailed (Degraded): a controller image cannot be pulled
	// (ErrImagePull, ImagePullBackOff, InvalidImageName or ErrImageNeverPull).
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonContainerStartFailed (Degraded): a controller container cannot be
	// created or started (CreateContainerConfigError, CreateContainerError or
	// RunContainerError), for example because a Secret or ConfigMap its env
	// refers to is missing.
	ReasonContainerStartFailed = "ContainerStartFailed"
	// ReasonDeploymentApplyFailed (Degraded): the Deployment could not be
	// written or deleted; the message has the API server's error.
	ReasonDeploymentApplyFailed = "DeploymentApplyFailed"
	// ReasonInvalidSpec (Degraded): the controller's spec cannot be applied
	// (an extraArgs flag the controller does not declare, or one the
	// operator sets itself); the message names it. The operator leaves the
	// controller's Deployment as it was.
	ReasonInvalidSpec = "InvalidSpec"
)
